// Package state defines what runbook persists and the Store interface the
// engine, the scheduler and the server use. Implementations live in
// sub-packages: bolt (a single bbolt file, the default) and postgres (one
// database for several `runbook serve` replicas).
//
// Everything a crashed run needs to resume is here: the run (playbook
// snapshot and hash, inputs, trigger, status, deadline), one small record
// per step (never whole-run snapshots, so cost stays linear in the number of
// steps), an append-only event log per run, intents for mutating calls,
// approvals, concurrency locks, cursors that outlive runs, and
// deduplication keys.
//
// Values are stored as they are given: redacting secrets is the caller's job
// (the engine redacts before every write).
//
// # Formats
//
// The bbolt file's format is FormatVersion (the file's
// meta/format_version); PostgreSQL's is its numbered migrations
// (postgres/migrations, from 0001_baseline). State a pre-release build
// wrote in another format (a file of an older version, a schema it
// migrated with other numbers) is refused at open, left as it was, with
// what to do; no release upgrades it.
//
// From the first tagged release on, every change to a format ships with
// its upgrade and a test of it. In bbolt, a field added at the end of a
// compact value (read only when bytes remain) needs no conversion; any
// other change raises FormatVersion and converts a file of the previous
// version when it is opened for writing. In PostgreSQL, a change is a new
// migration, additive only, applied by Open. The test builds the state of
// the previous release and checks that the new build reads it, upgraded,
// with nothing lost.
package state
