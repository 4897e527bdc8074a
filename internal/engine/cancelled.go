package engine

import (
	"context"
	"errors"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// Cancellations recorded by another process. On a store several
// processes share (replicas of runbook serve, runbook run beside them),
// another process may record a run cancelled while this one executes it
// (a replica's API, runbook runs cancel, a schedule's overlap: replace).
// Its notice normally cancels the run here at once; when the notice is
// lost, the store still refuses the run's next write that did not see
// the cancellation (state.ErrCancelledMeanwhile), so the cancel is never
// overwritten. The engine then cancels the run here with the recorded
// cause and ends it as any cancelled run: its waiting steps end
// cancelled, its finally steps run, and it is recorded cancelled.

// cancelledMeanwhileError is a write of the run refused so; cause is the
// recorded cancellation, as the run is cancelled with.
type cancelledMeanwhileError struct {
	err   error
	cause error
}

func (c *cancelledMeanwhileError) Error() string { return c.err.Error() }
func (c *cancelledMeanwhileError) Unwrap() error { return c.err }

// recordedCancel returns the cause of a run write refused because the
// run was recorded cancelled meanwhile (see saveRun), else nil.
func recordedCancel(err error) error {
	var c *cancelledMeanwhileError
	if errors.As(err, &c) {
		return c.cause
	}
	return nil
}

// cancelledMeanwhile handles err, the error of a write of rs.run: when the
// store refused it because the run was recorded cancelled since it was
// read, the run's record takes the stored cancellation (status, end,
// error: what its next write keeps), the run's execution is cancelled
// with it, and a *cancelledMeanwhileError is returned. Any other error is
// returned as it is. rs.runMu is held.
func (rs *runState) cancelledMeanwhile(ctx context.Context, err error) error {
	if !errors.Is(err, state.ErrCancelledMeanwhile) {
		return err
	}
	r := rs.run
	cause := RecordedCancelCause(nil) // its record unread: the cause unknown
	if stored, gerr := rs.e.o.Store.GetRun(ctx, r.ID); gerr == nil {
		r.EndedAt, r.Error = stored.EndedAt, stored.Error
		cause = RecordedCancelCause(stored)
	}
	r.Status, r.WakeAt, r.AnswerOnly = state.RunCancelled, time.Time{}, false
	rs.e.o.Logger.Info("run recorded cancelled by another process while it executed here; cancelling it", "run_id", r.ID, "cause", cause.Message)
	rs.e.cancelActive(r.ID, cause)
	return &cancelledMeanwhileError{err: err, cause: cause}
}

// RecordedCancelCause is the cause of run r, recorded cancelled (by
// this process or another): a cancellation with its recorded error's
// message, else (r nil, or no message) with "run cancelled". Its host
// ends a run another replica cancelled with it (internal/runner).
func RecordedCancelCause(r *state.Run) *fault.Error {
	cause := &fault.Error{Code: fault.Cancelled, Message: "run cancelled"}
	if r != nil && r.Error != nil && r.Error.Message != "" {
		cause.Message = r.Error.Message
	}
	return cause
}

// saveRunSteps writes rs.run with recs and evs in one commit. When the
// store refuses it because the run was recorded cancelled meanwhile
// (cancelledMeanwhile), recs, the run's unwritten start and the events
// kept are put back for the write that records the run cancelled.
// rs.runMu and rs.lazyMu are held.
func (rs *runState) saveRunSteps(ctx context.Context, recs []*state.StepRecord, start, kept, evs []state.Event) error {
	err := rs.refused(rs.e.o.Store.SaveRunSteps(ctx, rs.run, recs, evs...))
	if err == nil {
		return nil
	}
	if err = rs.cancelledMeanwhile(ctx, err); recordedCancel(err) != nil {
		rs.lazy, rs.lazyEvents, rs.start = recs, kept, start
	}
	return err
}
