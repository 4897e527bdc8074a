// Package postgres implements state.Store in a PostgreSQL database, so
// that several "runbook serve" replicas share one state: runs, steps,
// events, intents, approvals, locks, cursors and deduplication keys. It
// passes the same contract suite as the bbolt store
// (internal/state/statetest).
//
// # Opening
//
// Open takes a postgres:// or postgresql:// URL (or libpq's key=value
// form; pgxpool's pool_* parameters apply), connects, and applies the
// migrations the database lacks before returning. Open is bounded by
// Options.Timeout (default 30 seconds) besides ctx. Its errors are coded
// (internal/fault): Invalid for a DSN that does not parse, Unavailable
// for a server that does not answer. No error or log line carries the
// DSN or its password: the database is named host:port/database.
//
// # Schema and migrations
//
// The schema is versioned SQL embedded in the binary (migrations/
// NNNN_name.sql): 0001_baseline creates the tables, and each later
// version changes them, additively (see the state package's "Formats").
// Open takes a session advisory lock (keyed by the schema the tables live
// in), creates runbook_schema_migrations if needed, applies each missing
// version in its own transaction and records it with a checksum, then
// releases the lock: replicas starting together wait for one another and
// each version is applied once. A crash mid-way rolls the version back
// and drops the lock with the connection. Migrations are additive only
// (new tables, columns, indexes; never a drop, rename or type change,
// which a test enforces), so a replica of the previous release keeps
// working while the others are upgraded; versions in the database that
// this build does not know are logged, not refused. A schema whose
// recorded version this build knows under another name was made by a
// pre-release build (its 0001 is "initial"): Open and Pending refuse it
// and change nothing. Pending lists the versions a database lacks without
// applying them (for a "migrate --dry-run"). The tables go in the first
// schema of the connection's search_path (public unless the DSN sets
// search_path).
//
// # Tables
//
//	runbook_runs        one row per run: record (JSON) and the columns
//	                    listings use: status, playbook, parent_id,
//	                    trigger_type, trigger_key, created_ns, ...
//	runbook_snapshots   playbook sources by hash, shared by runs
//	runbook_steps       one row per step, ord = first-saved order
//	runbook_events      (run_id, seq) -> event, seq from 1 per run
//	runbook_intents, runbook_approvals   (run_id, step) -> record
//	runbook_locks       key -> owner; the primary key is the lock
//	runbook_cursors     key -> bytes
//	runbook_schedule_pauses  (playbook, trigger) -> state.SchedulePause
//	runbook_dedup       key -> first_seen, expires_at, value
//	runbook_deliveries  id -> a webhook delivery's body, once for its runs
//
// Records are kept whole as JSON (type json: the text as written, so
// nanosecond times and "\u0000" in a webhook payload round-trip; jsonb
// would refuse the latter) beside the columns that filters, orders and
// foreign keys use. Keys and IDs are COLLATE "C", ordered by bytes as
// the bbolt store orders them, whatever the database's locale.
// ListRuns orders by (created_ns, id) descending; every listing index
// ends with those columns, so a filtered page is one index range, and
// RunFilter.Before pages by keyset from the last run of a page.
//
// # Transactions and exactly-once
//
// Every method is one transaction (read committed), and the writes the
// engine makes for every step (CreateRun, SaveRun, SaveStep(s),
// AppendEvents, Dedup) are one round trip: their statements go in one
// pgx.Batch, which PostgreSQL runs as one implicit transaction, all or
// nothing. Each batch is built so that a refusal leaves nothing written:
// a taken run ID fails the run's insert on its primary key, which undoes
// the statements before it; a missing run fails a foreign key or matches
// no row. AcquireLock takes a free key with the free keys asked for at
// the same moment, in one statement (see lockGroup); a key held already
// is looked at in an explicit transaction, which decides as it goes; so
// is CommitDelivery when one of its claims is already recorded. New
// deliveries (the common case) that wait at the same moment are
// committed together, in one transaction of four statements that writes
// each table with one INSERT … SELECT FROM unnest and leaves out a
// delivery whose key is recorded (see commitGroup); it also takes the
// free concurrency keys of the runs it commits already claimed, whose
// AcquireLock is then answered without a statement (see groupInsert,
// committedKeys). A run's write, its events, its step records and the
// release of its key are one statement (see saveRunStatement). The
// writes an executing run makes, fenced for the top-level run they
// write, share transactions with the other runs' writes waiting at the
// same moment (see commitWrites: a member its fence refuses is left out
// and refused alone, failing no other), and the claims a replica makes
// at the same moment are one statement that also reads the claimed runs'
// step records for the engine's first read (see claimGroup).
//
// Event numbers come from the run's last_seq, taken with an UPDATE that
// holds the run's row until commit, so concurrent writers of a run (on
// any replica) get consecutive numbers and a call's events stay
// together. Steps, intents and approvals reference their run (ON DELETE
// CASCADE); events are inserted only by a statement that writes their
// run first, and go with it through a trigger (migration 0003), without a
// foreign key's check for each event. A write to a run that does not
// exist fails with state.ErrNotFound and writes nothing.
//
// Fencing (state.Fence): a write made for a run's executor (the engine of
// a replica) starts with the fence's statement (fence.go), which locks the
// top-level run's row and fails the transaction when its owner is no
// longer the fence's, so a replica that lost a
// run (its lease lapsed and another claimed it) writes nothing to it:
// SaveRun, SaveRunSteps, SaveStep(s), AppendEvents, PutIntent and a
// sub-playbook run's CreateRun then fail with a *state.FencedError naming
// the new owner. A claim, an update of the owner, waits for a fenced write
// in flight; writes without a fence (an approval, the CLI's cancel) are
// not checked.
//
// Claims are primary keys written with INSERT ... ON CONFLICT: a dedup
// key, a lock, a run ID. A transaction that claims a key another has just
// claimed waits for that one to end and then finds it taken, so a webhook
// delivery, a hook or a schedule slot starts its runs once, whichever
// replicas receive it. A delivery first takes an advisory lock for each
// key it will claim, in one global order, so that two deliveries of the
// same hooks in another order wait for each other instead of
// deadlocking. A transaction that PostgreSQL aborts all the same (a
// deadlock, a serialization failure) is run again, up to five times in
// all, which is why Delivery.Done may be called more than once.
//
// Deduplication expiry is measured on the store's clock (Options.Now),
// to the microsecond, not the server's: replicas' clocks should be
// synchronized, and a skew between them shifts expiry by that much.
// Expired keys are deleted 64 at a time by later Dedup and
// CommitDelivery calls (FOR UPDATE SKIP LOCKED, so replicas pruning at
// once do not wait for each other).
//
// # Performance and server settings
//
// Every commit is durable: the store never turns synchronous_commit off,
// so a write is answered once its WAL record is flushed. Throughput comes
// from commits in flight side by side sharing a flush (group commit): the
// pool holds DefaultMaxConns connections (4 per CPU, at least 16) unless
// the DSN's pool_max_conns or Options.MaxConns says otherwise, the hot
// writes are one round trip each, and new webhook deliveries, runs'
// writes, claims and free keys share transactions (commitGroup,
// commitWrites, claimGroup, lockGroup). The bodies of the deliveries a
// store committed are kept in memory for a minute (a body never changes
// once stored), so the runs a delivery starts read it without a round
// trip. PostgreSQL's commit_delay (with
// commit_siblings) makes a commit wait briefly for others to share its
// flush, which can help a disk with slow flushes; it is a server setting
// (postgresql.conf), not the store's, and the defaults (off) were used
// for the figures. Statements are prepared once per connection (pgx's
// statement cache). Records are json, not jsonb: json is stored as
// written, cheaper to insert, and keeps what jsonb would refuse.
// The figures and how to take them: make bench (BenchmarkIntake,
// BenchmarkWebhookIntake, BenchmarkSequentialSetSteps and
// BenchmarkSequentialShellSteps on both stores, BenchmarkGroupedStepWrites).
//
// # Caveats
//
// A method whose context is cancelled before it starts fails with the
// context's error and writes nothing; once started, a cancelled context
// rolls its transaction back, except when it ends while the COMMIT is on
// its way: then, as with any database, the caller cannot tell whether it
// committed (the exactly-once claims make a retry safe). The store does not redact: callers do.
package postgres
