package engine

import "context"

// Process is the ID this engine records as the owner of the runs it
// executes (Options.Process, "host/pid" by default); a `runbook serve`
// replica is known to the others by it.
func (e *Engine) Process() string { return e.o.Process }

// Wake does for run runID what an answered approval does in this process
// (see Approve): a run waiting here reads its approvals again at once, a
// parked one is handed to Options.Wake. A replica calls it when another
// replica (or the CLI) recorded the answer.
func (e *Engine) Wake(ctx context.Context, runID string) {
	e.wake(runID)
	e.wakeParked(ctx, runID)
}
