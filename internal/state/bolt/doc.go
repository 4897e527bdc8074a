// Package bolt implements state.Store on a single bbolt file, the default
// runbook state backend.
//
// # Opening
//
// Open always sets a lock timeout (Options.Timeout, default one second):
// when another process (a running "runbook serve" or "runbook run") holds
// the file, Open fails with an error wrapping state.ErrLocked that names the
// file. An existing file is first checked read-only; a file that is not a
// bbolt file, is truncated, lacks runbook metadata or makes bbolt panic is
// refused with state.ErrCorrupt and left exactly as it was, and released:
// restored in place, it opens in the same process (the freelist page is
// checked before bbolt reads it, which it does with the file mapped and
// would panic on, or exhaust memory over, a damaged one). A file of
// another state.FormatVersion is refused, also left as it was: a newer
// one was written by a newer runbook, an older one by a pre-release build
// (no release upgrades it; see the state package's "Formats"). New files
// are created with mode 0600 in a directory created with mode 0700. An
// empty file (zero bytes, or a bbolt file with no buckets) holds nothing
// and is initialized.
//
// # Layout
//
//	meta/format_version            decimal state.FormatVersion
//	runs/<run id>                  Run, without the snapshot when it has a hash,
//	                               its source named by number
//	snapshots/<hash>               playbook source, once per hash
//	sources/n<number>              a run source: playbook, file, snapshot hash
//	sources/k<source>              its number (sources.go)
//	runs_by_created/<t><run id>    {status, playbook, parent} for ListRuns
//	rundata/<run id>/s<step>       StepRecord
//	rundata/<run id>/o<n>          step id, n from 1 in first-saved order
//	rundata/<run id>/E<seq>        events from seq on, consecutive, up to about
//	                               512 bytes a block (eventblocks.go); seq from 1
//	                               per run
//	rundata/<run id>/i<step>       Intent JSON
//	rundata/<run id>/a<step>       Approval JSON
//	locks/<key>                    Lock JSON
//	cursors/<key>                  raw bytes
//	dedup/<key>                    first-seen, expiry, value (DedupSet)
//	dedup_expiry/<t><key>          expiry index for pruning
//	deliveries/<delivery id>       a webhook delivery's body, once for its runs
//	                               (created by the first delivery that stores one)
//	audit/<seq>                    AuditRecord, seq from 1 (auth.go; created by
//	                               the first record)
//	tokens/<name>                  Token JSON (created by the first token)
//	stepoutput/<run id>/<seq>      a chunk of step output lines from seq on
//	                               (state.StepOutput, steplog.go; created by the
//	                               first append)
//	schedule_pauses/<pb>0<trigger> state.SchedulePause JSON, the trigger index
//	                               plus one, big-endian (schedule.go; created by
//	                               the first pause)
//	run_pauses/<id>                state.RunPause JSON (runpause.go; created by
//	                               the first pause)
//
// Integers and times in keys are big-endian, so byte order is numeric
// order (times have their sign bit flipped).
//
// A run's bucket has plain keys only, prefixed by their kind: bbolt
// stores a bucket without sub-buckets and under a quarter page inline in
// its parent's leaf, so a run costs no page of its own while it is small.
// The bucket's sequence is the run's last event number; a new step's
// order number is one past the last "o" key.
//
// Events, step records, index entries, run records and audit records are
// written in a compact binary encoding (codec.go): no field names, times
// as 8 bytes, what the key says (an event's number, a step's run and ID,
// a run's ID) left out, a playbook hash as its 32 bytes, the engine's
// recurring strings as one byte. With its events in one block, a run
// waiting on an approval (six events and its step) keeps a bucket of
// about 360 bytes, inline; one that ran three steps, about 700. A run
// record writes the times set as the run goes on at their final size from
// its creation, so that rewriting it does not grow it, and names its
// playbook, file and snapshot hash by the number of that source: a
// waiting run's record is about 110 bytes.
//
// Usage (usage.go) walks a file and sums its bytes and pages per bucket
// and per kind of run key: where a file's size goes.
//
// # Transactions and cost
//
// Every Store method is atomic: its writes are kept together or not at
// all. SaveStep writes one step record, its order entry the first time
// (found with a seek, not a scan), and its events: never the run or the
// other steps, so a run's cost is linear in its steps and events.
// CommitDelivery is one write however many claims and runs a webhook
// delivery has. A new run's record, index entry and inline bucket share
// their leaves with the runs created in the same transaction, so a group
// of new runs writes a few pages, not one per run. Each write transaction
// is fsynced (unless Options.NoSync, for tests only).
//
// Writes are group-committed: one writer goroutine per store takes the
// oldest queued write and every other one queued by then (up to 256), runs
// them in one bbolt transaction and answers each, so concurrent writers
// share an fsync and a lone writer waits for nothing but its own commit.
// After committing a group of four or more, the writer waits up to a
// millisecond for as many writes to queue before taking the next group,
// so that writers answered together commit together again. A
// write whose function fails is rolled back and answered with its error;
// the others of its group run again in the next transaction, which is why
// every update function must be safe to run more than once. Methods check
// ctx before starting; a write whose ctx ends while it is still queued is
// dropped with ctx's error, a started write is not interrupted. Close
// commits the writes already queued; later writes fail.
//
// # Caveats
//
// Methods that write to a run (SaveRun, SaveStep, AppendEvents, PutIntent,
// AnswerApproval) fail with state.ErrNotFound when the run was never created.
// A panic inside bbolt while reading a damaged page is recovered and
// reported as state.ErrCorrupt. The store does not redact: callers do.
package bolt
