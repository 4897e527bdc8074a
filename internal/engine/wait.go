package engine

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// runMain runs the main steps and reports whether the run must park.
//
// A step waiting for an approval suspends (AwaitApproval returns
// ErrSuspended) and its dependents do not start. With ApprovalPark the run
// then parks. With ApprovalWait the run waits here — at the bottom of its
// goroutine's stack, not deep inside the step, so that a waiting run costs
// a small stack and one timer — until Approve wakes it, the poll period or
// the earliest approval deadline passes, or ctx ends; then it runs the list
// again (finished steps are not re-run, suspended ones continue the same
// attempt). When ctx ends, the waiting steps end cancelled (or failed, on
// the run's timeout).
func (rs *runState) runMain(ctx context.Context) bool {
	e := rs.e
	for {
		if cause := runCause(ctx); cause != nil && !errors.Is(cause, ErrSuspend) {
			// Resumed to end (cancelled while parked, or past its
			// deadline): the waiting steps end cancelled (or timed out).
			rs.endWaiting(ctx)
		}
		// Register the wake before the steps read their approvals: an
		// Approve that commits after a read ends the sleep below.
		wctx, done := e.waiter(ctx, rs.run.ID)
		rs.runList(ctx, rs.pb.Steps, phaseMain)
		rs.mu.Lock()
		waiting, until := rs.waiting, rs.wakeBy
		if e.o.Approvals == ApprovalWait {
			rs.waiting, rs.wakeBy = false, time.Time{}
		}
		rs.mu.Unlock()
		if !waiting || e.o.Approvals != ApprovalWait {
			done()
			return waiting
		}
		rs.markWaiting(ctx)
		rs.flushDue(ctx)
		wait := e.o.ApprovalPoll
		if !until.IsZero() {
			wait = min(wait, until.Sub(e.o.Clock.Now()))
		}
		_ = e.o.Clock.Sleep(wctx, wait) // ends early when Approve wakes it
		done()
		if ctx.Err() != nil {
			rs.endWaiting(ctx)
			return false
		}
	}
}

// markWaiting records that the run, waiting in this process, only waits
// for approvals now: its record says waiting until an answer (or a
// timeout) lets it go on (markGoingOn), as a parked run's does.
func (rs *runState) markWaiting(ctx context.Context) {
	rs.runMu.Lock()
	changed := rs.run.Status == state.RunRunning
	if changed {
		rs.run.Status = state.RunWaiting
	}
	rs.runMu.Unlock()
	if changed {
		rs.saveStatus(ctx, state.Event{Type: "run.waiting", Message: "run is waiting for an approval"})
	}
}

// markGoingOn records that a run waiting in this process goes on: an
// approval of step was answered or timed out. Step goroutines call it.
func (rs *runState) markGoingOn(ctx context.Context, step, why string) {
	rs.runMu.Lock()
	changed := rs.run.Status == state.RunWaiting
	if changed {
		rs.run.Status = state.RunRunning
	}
	rs.runMu.Unlock()
	if changed {
		rs.saveStatus(ctx, state.Event{Type: "run.resumed", Message: "run resumed: the approval of step " + step + " " + why})
	}
}

// saveStatus persists the run's status with ev; a failed write is logged:
// the run goes on and its next write records the status.
func (rs *runState) saveStatus(ctx context.Context, ev state.Event) {
	ev.Time = rs.e.o.Clock.Now()
	if err := rs.saveRun(ctx, ev); err != nil && recordedCancel(err) == nil {
		rs.e.o.Logger.Error("record run status", "run_id", rs.run.ID, "status", ev.Type, "err", err)
	}
}

// endWaiting finishes the steps still waiting when the run's ctx ended.
func (rs *runState) endWaiting(ctx context.Context) {
	rs.mu.RLock()
	var waiting []*state.StepRecord
	for _, rec := range rs.records {
		if rec.Status == state.StepWaiting {
			waiting = append(waiting, rec)
		}
	}
	rs.mu.RUnlock()
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].ID < waiting[j].ID })
	for _, rec := range waiting {
		rs.endChild(ctx, rec.ID)
		sr := &stepRun{rs: rs, rec: rec}
		sr.finish(ctx, nil, context.Cause(ctx))
	}
}

// waiter returns a context that Approve of a step of runID in this process
// cancels; done unregisters it. The wake is a cancel func in a map: no
// goroutine or channel per waiting run.
func (e *Engine) waiter(ctx context.Context, runID string) (context.Context, func()) {
	if e.o.Approvals != ApprovalWait {
		return ctx, func() {}
	}
	wctx, wake := context.WithCancel(ctx)
	e.mu.Lock()
	e.waiters[runID] = wake
	e.mu.Unlock()
	return wctx, func() {
		e.mu.Lock()
		delete(e.waiters, runID)
		e.mu.Unlock()
		wake()
	}
}

// wake ends the approval wait of run runID, if it waits in this process.
func (e *Engine) wake(runID string) {
	e.mu.Lock()
	wake := e.waiters[runID]
	e.mu.Unlock()
	if wake != nil {
		wake()
	}
}
