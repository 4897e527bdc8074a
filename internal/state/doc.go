// Package state defines what runbook persists and the Store interface the
// engine, the scheduler and the server use. Implementations live in
// sub-packages: bolt (a single bbolt file, the default) and, later, etcd for
// several `runbook serve` replicas.
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
package state
