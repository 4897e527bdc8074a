// Package engine executes playbooks durably.
//
// A run is created (Start) with its playbook snapshot, inputs and trigger,
// then executed (Execute) or resumed after a crash (Resume). Prepare builds
// the record Start would create without committing it, for a caller that
// commits it with other writes (a webhook delivery, see
// state.Store.CommitDelivery). Every step
// transition is written to the state.Store before the engine moves on;
// what a later process needs to continue — outputs, attempts, checkpoints,
// intents of mutating calls, approval answers — is in the store, never only
// in memory.
//
// Store faults (storefault.go): a read or write of a run's state that
// fails with state.ErrUnavailable is made again (backoff and jitter) until
// it is made, the host's context ends, or another process owns the run; a
// write that fails with any other error stops the run as failed
// (ErrNotWritten). A run releases its concurrency key only once its end
// or suspension is recorded.
//
// A running step is a record: before an attempt's process or call
// starts, its record says running, with the attempt and its start, so that
// the API, runs show and the UI show it (its printed lines are in the
// store's output area as it prints them, in batches, state.StepOutput;
// those still waiting when an attempt ends go with the step's next write,
// its end's, StepRecord.Printed). A step that
// runs alone in its list holds its end for what follows (stepRun.chained):
// the next step's start is written with it, so a chain costs one commit
// per step; nothing waits while an end is held (flushDue). Pure steps
// (set, log) compute only: their records go with the run's next write.
// So do an idempotent step's (file.line: running it again changes
// nothing), unless an attempt runs for ShownAfter or waits to be tried
// again: then it is on record from that moment, as any step.
// A record left running by a process that died is run again on resume
// (a mutating step reconciles its intent first).
//
// Ordering: a step without `needs` waits for every earlier step of its list
// (the order of writing); a step with `needs` waits for those only, so
// independent branches run concurrently, at most MaxParallel at a time.
// `for_each` items run up to the step's own max_parallel.
//
// Conditions: a step without `if` runs when no step has failed so far
// (success()); status functions in `if` change that. A step whose explicit
// `needs` did not succeed is skipped unless its `if` uses a status function.
// continue_on_error records the failure but does not fail the run.
//
// Retries: only errors whose code is retryable (fault.Retryable) unless
// retry.if says otherwise; delays grow by backoff up to max_delay, with
// optional full jitter, and are waited on the injected Clock.
//
// Mutating steps: an intent is persisted before each attempt; a resumed or
// retried step whose previous intent has no recorded outcome calls the
// step's Reconcile hook first and adopts what it finds.
//
// Retry: Retry creates a new run of a failed or cancelled run's snapshot
// that starts at a chosen step and reuses the records of the steps before
// it (unless they depend on it through needs, or did not finish). The
// records are copied lazily and idempotently: executing or resuming a run
// with RetryOf set copies whatever is missing first.
//
// Parking: an unanswered approval suspends its step, and the run is
// saved as waiting and returns; answered, it is resumed (finished steps
// are kept, the suspended step continues the same attempt). With
// Options.Host.ParkAfter (the run host of a server, internal/runner) long
// waits park too — a sleep, a cloud task between polls, a retry's delay
// (steps.WaitUntil). A parked run records when it is due (Run.WakeAt) and
// keeps its concurrency key; its host executes it again then, when an
// answer decides an approval (Answer says so) or when it is cancelled
// (CancelNext, park.go). A run whose concurrency key is held parks too,
// without the key (Run.QueuedOnKey), until its host hands it the key
// (concurrency.go); an API resume ends a parked run's timed waits now
// (Run.WokenEarly, endTimedWaits).
//
// Its host: the engine calls nothing back. What the run host
// (internal/runner) decides before a run executes is data in
// Options.Host; what it decides while runs execute it pushes in, and the
// engine measures or matches it before each step attempt starts: the
// lease the runs execute under (SetLease; Fence stops them), the run
// pauses (SetPauses), the concurrency keys with runs queued on them there
// (SetKeyQueued). What the engine did the host reads from what Execute
// and Resume return (ended, parked, stopped) and, for each concurrency
// key released, from Released. Options.Host.Agents, where a step's
// attempt executes on an agent, is the one interface of the host the
// engine calls.
//
// Sharing: Options.Playbooks.Parse results may be cached and shared by many runs; the
// engine never mutates a *playbook.Playbook.
//
// Secrets: values are registered with the Redactor when the run starts;
// every expression is evaluated through expr.EvalDerived, and the strings
// it computed from a secret (upper(), sha256(), slices, joins, a secret
// input, an env value or item built from one, a step result holding a
// secret output) are registered with AddDerived before the value is used;
// outputs, errors, checkpoints and log events are redacted before they are
// written or shown, and the scope later steps see holds the same redacted
// outputs a resumed run would read back.
//
// Inside, a runState is one run executing in this process: its record
// and lifecycle, the order its lists run in, the scope its expressions
// read, its batched writes. Each step, and each for_each item, runs as a
// stepRun, which owns the step's record from its condition through its
// attempts to its final status.
//
// The engine imports the step contract (internal/steps), never a family.
package engine
