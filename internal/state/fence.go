package state

import (
	"context"
	"fmt"
)

// Fence is what a write made on behalf of a run's executor carries, so
// that a store shared by several processes refuses it once another
// process owns the run (fencing). Owner is the executor (the Owner its
// runs are recorded with) and Run the top-level run whose owner decides:
// the run written, or the run a sub-playbook run was started by.
//
// A store shared by several processes (PostgreSQL) makes every write that
// moves a run forward (CreateRun of a sub-playbook run, SaveRun,
// SaveRunSteps, SaveStep, SaveSteps, AppendEvents, PutIntent) conditional
// on Run's owner being Owner, checked in the write's own transaction; a
// refused write writes nothing and fails with a *FencedError (errors.Is
// ErrFenced). A write without a fence (the CLI's cancel, an approval
// answered on another replica) is never refused for its owner. A store
// held by one process (bbolt) may ignore the fence: no other process can
// have taken the run.
type Fence struct {
	Owner string
	Run   string
}

type fenceKey struct{}

// WithFence returns ctx with f: the store writes made with it are fenced.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence ctx carries, if any.
func FenceOf(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok && f.Run != ""
}

// FencedError is a write refused by its fence: run Run is owned by Owner
// now (empty: by no process), not by the fence's owner.
type FencedError struct {
	Run   string
	Owner string
}

func (e *FencedError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("run %s is no longer owned by this process", e.Run)
	}
	return fmt.Sprintf("run %s is owned by %s now, not by this process", e.Run, e.Owner)
}

// Is makes a FencedError ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
