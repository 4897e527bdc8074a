package steps

import (
	"context"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// Parking. A step that waits for a moment (a sleep's end, a task's next
// poll) calls WaitUntil. A host that can park a run (runbook serve) makes
// the step return a *Suspended instead of holding a goroutine: the run is
// persisted as waiting, with its wake time, and the step runs again at
// Until as the same attempt, with the checkpoint it saved before waiting.
// Any other host (the CLI, tests) waits in process, as a timer.

// Suspended is the error of a step attempt parked until Until. It is a
// fault.ErrSuspended: the engine records the step waiting and its run
// waiting, not failed.
type Suspended struct {
	Until time.Time
	// Why says what the step waits for ("sleep", "task poll"), for the
	// run's events.
	Why string
}

func (s *Suspended) Error() string {
	return "step parked until " + s.Until.UTC().Format(time.RFC3339Nano) + " (" + s.Why + ")"
}

// Is makes a *Suspended match fault.ErrSuspended.
func (s *Suspended) Is(target error) bool { return target == fault.ErrSuspended }

// Parker is implemented by a Host that can park the run of a step waiting
// until a moment instead of keeping a goroutine for it. Parks reports
// whether a wait of d is parked (a host parks only waits long enough to be
// worth a resume).
type Parker interface {
	Parks(d time.Duration) bool
}

// Waker is implemented by a Host whose run can be woken before a parked
// wait ends (runbook serve: an API resume of the parked run). WokenEarly
// reports whether the step's wait until until, the one its run was parked
// on, ends now.
type Waker interface {
	WokenEarly(until time.Time) bool
}

// WaitUntil waits until until (by c.Now) or until ctx ends (returning its
// error). When c's host parks a wait that long, it returns a *Suspended at
// once instead: the step must return it unchanged, having checkpointed
// what it needs to continue (its deadline, what it polls), since it is run
// again at until from its checkpoint. why names the wait in the run's
// events.
func WaitUntil(ctx context.Context, c *Call, until time.Time, why string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	left := until.Sub(c.Now())
	if left <= 0 {
		return nil
	}
	if w, ok := c.Host.(Waker); ok && w.WokenEarly(until) {
		return nil
	}
	if p, ok := c.Host.(Parker); ok && p.Parks(left) {
		return &Suspended{Until: until, Why: why}
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
