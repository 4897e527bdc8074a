package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// Parking. A step that waits — an approval, a sleep, a
// task's next poll, a parked sub-playbook run, a retry's delay — returns suspended
// (fault.ErrSuspended; a *steps.Suspended carries the moment its wait
// ends). Once the run's list has run, a run with suspended steps parks:
// it is saved waiting, with WakeAt the earliest end of its waits (or its
// deadline), keeps its concurrency key, and its goroutine returns. The
// caller (runbook serve) resumes it at WakeAt, or when Options.Wake is
// called: an approval answered, a cancellation. A resumed step continues
// the same attempt from its checkpoint: a sleep ends at its first
// deadline, a task wait polls again, an approval reads its answer; a
// mutating step reconciles as on any resume.

// Parks implements steps.Parker: a wait of
// ParkAfter or more parks the run, unless the step has a timeout of its
// own (which the wait must run out under) — that one waits in process.
func (h *host) Parks(d time.Duration) bool {
	return h.sr.parks(d) && (h.sr.st == nil || h.sr.st.Timeout == 0)
}

// parks reports whether the run parks a wait of d:
// one of ParkAfter or more. A retry's delay parks so (a step's timeout
// bounds each attempt, not the delays between them).
func (sr *stepRun) parks(d time.Duration) bool {
	e := sr.rs.e
	return e.o.Host.ParkAfter > 0 && d >= e.o.Host.ParkAfter
}

// park leaves the step waiting until p.Until (a *steps.Suspended). The
// record is always written: the attempt may have checkpointed since its
// last write (a task wait's poll), and the stored status must say waiting
// so that the resume continues this attempt.
func (sr *stepRun) park(ctx context.Context, attempt int, continuing bool, p *steps.Suspended) state.StepStatus {
	rs := sr.rs
	rs.setWaiting()
	rs.mu.Lock()
	rs.wakeByLocked(p.Until)
	rs.mu.Unlock()
	sr.rec.Status = state.StepWaiting
	if !sr.child {
		// Parked until a moment (a sleep, a poll). A step waiting on a
		// sub-playbook run waits on what that run waits on (an approval,
		// perhaps): its record says nothing of a moment.
		sr.rec.WakeAt = p.Until
	}
	if continuing {
		sr.save(ctx)
		return state.StepWaiting
	}
	sr.save(ctx, state.Event{Type: "step.waiting", Step: sr.rec.ID, Attempt: attempt,
		Message: fmt.Sprintf("waiting until %s: %s", p.Until.UTC().Format(time.RFC3339), p.Why),
		Data:    map[string]any{"until": p.Until.UTC().Format(time.RFC3339Nano)}})
	return state.StepWaiting
}

// parkAndLeave parks the run and stops executing it. A cancellation that
// came while it parked (Cancel found it executing, after its steps had
// settled) is not lost: once the run no longer executes here, it is noted
// for its next execution (CancelNext), which its host, told of the
// cancel, starts at once.
func (rs *runState) parkAndLeave(ctx context.Context) (*state.Run, error) {
	out, err := rs.park(ctx)
	if recordedCancel(err) != nil {
		// Recorded cancelled meanwhile (cancelled.go), its context now
		// cancelled: it does not park but ends here, as one resumed to
		// end does.
		rs.mu.Lock()
		rs.holdKey = false
		rs.mu.Unlock()
		rs.endWaiting(ctx)
		return rs.end(ctx)
	}
	// No longer active, and its cause read, at once: a Cancel (which
	// cancels under e.mu) came before, and the cause says so, or after,
	// and finds the run inactive (cancelActive).
	rs.e.mu.Lock()
	delete(rs.e.active, rs.run.ID)
	cause := runCause(ctx)
	rs.e.mu.Unlock()
	if ferr := rs.fenced(); err == nil && ferr != nil {
		// Parked by a write made while this process's lease lapsed: the
		// run goes on where it is claimed next, waiting as recorded.
		return out, ferr
	}
	if err == nil && cause != nil && !errors.Is(cause, ErrSuspend) && !errors.Is(cause, errRunTimeout) {
		rs.e.CancelNext(rs.run.ID, cause)
	}
	return out, err
}

// endChild ends the unfinished sub-playbook run that waiting step stepID
// started, as its run ends (ctx ended): parked, it is not executing
// inside the step as a child waiting in process is, so it is executed
// once more, cancelled (its waiting steps cancelled, its finally run).
func (rs *runState) endChild(ctx context.Context, stepID string) {
	e := rs.e
	cause := runCause(ctx)
	if cause == nil || errors.Is(cause, ErrSuspend) || errors.Is(cause, state.ErrFenced) {
		return // a suspended run's child waits with it; a fenced one's is another process's
	}
	wctx, stop := e.writeCtx(ctx)
	defer stop()
	id := childRunID(rs.run.ID, stepID)
	child, err := e.o.Store.GetRun(wctx, id)
	if err != nil || child.Status.Done() {
		return
	}
	e.mu.Lock()
	e.cancelNext[id] = cancelCause(cause)
	e.mu.Unlock()
	if _, err := e.Resume(wctx, id); err != nil && fault.CodeOf(err) != fault.Cancelled {
		e.o.Logger.Error("end the sub-playbook run of a waiting step", "run_id", rs.run.ID, "step", stepID, "child", id, "err", err)
	}
	e.takeCancel(id) // when Resume did not reach it
}

// wakeByLocked notes t (zero: none) as a moment the run must go on by
// itself. rs.mu is held.
func (rs *runState) wakeByLocked(t time.Time) {
	if !t.IsZero() && (rs.wakeBy.IsZero() || t.Before(rs.wakeBy)) {
		rs.wakeBy = t
	}
}

// parkNote sets the run's WakeAt, the earliest of its waits' ends and its
// deadline (zero: only an answer wakes it), and returns the run.waiting
// event's message.
func (rs *runState) parkNote() string {
	rs.mu.Lock()
	wake := rs.wakeBy
	rs.wakeBy = time.Time{}
	rs.holdKey = true
	rs.mu.Unlock()
	if d := rs.run.Deadline; !d.IsZero() && (wake.IsZero() || d.Before(wake)) {
		wake = d
	}
	rs.run.WakeAt, rs.run.AnswerOnly = wake, wake.IsZero()
	if why := rs.pauseNote(); why != "" {
		return "run is paused: " + why + "; it goes on when the pause is lifted"
	}
	if wake.IsZero() {
		return "run is waiting for an approval"
	}
	return "run is waiting until " + wake.UTC().Format(time.RFC3339) + " (or an answer)"
}

// keepsKey reports whether the run's concurrency key stays held when its
// execution returns: a parked run keeps it, as a run
// waiting in process does, and so does a fenced run (it goes on
// elsewhere) and a run whose end or suspension could not be recorded (it
// is unfinished: whoever resumes it goes on holding it). A fenced run
// whose end this execution recorded does not: nothing goes on with it (its
// lease lapsed while the write that ended it was tried again, say).
func (rs *runState) keepsKey() bool {
	rs.runMu.Lock()
	settled := rs.settled
	ended := settled && rs.run.Status.Done()
	rs.runMu.Unlock()
	if rs.fenced() != nil && !ended {
		return true
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.holdKey || !settled
}

// takeCancel returns (and forgets) the cause a parked run runID was
// cancelled with, if any: its execution starts cancelled.
func (e *Engine) takeCancel(runID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	cause := e.cancelNext[runID]
	delete(e.cancelNext, runID)
	return cause
}

// CancelNext has run runID, which does not execute in this process, start
// cancelled with cause at its next execution here, so that it ends as a
// run cancelled while executing does (waiting steps cancelled, finally
// run). Its host, which holds it parked, executes it next (a sub-playbook
// run through its top-level run: TopLevel).
func (e *Engine) CancelNext(runID string, cause error) {
	e.mu.Lock()
	e.cancelNext[runID] = cancelCause(cause)
	e.mu.Unlock()
}

// ForgetCancel drops what CancelNext noted for run runID and returns its
// cause (nil: none): its host does not execute it here after all.
func (e *Engine) ForgetCancel(runID string) error { return e.takeCancel(runID) }

// CancelledMessage is the message a run cancelled with cause is recorded
// with, redacted.
func (e *Engine) CancelledMessage(cause error) string {
	return e.o.Redactor.String(cancelledMessage(cause))
}

// TakeCancels returns (and forgets) every cause CancelNext noted that no
// execution here has taken, by run: its host stops, and records them.
func (e *Engine) TakeCancels() map[string]error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.cancelNext) == 0 {
		return nil
	}
	out := e.cancelNext
	e.cancelNext = map[string]error{}
	return out
}

// TopLevel returns the ID of the run that started runID through
// sub-playbook steps (runID itself for a top-level run, or when a parent
// cannot be read): the run its host holds.
func (e *Engine) TopLevel(ctx context.Context, runID string) string { return e.topLevel(ctx, runID) }

// topLevel returns the ID of the run that started runID through
// sub-playbook steps (runID itself for a top-level run, or when a parent
// cannot be read).
func (e *Engine) topLevel(ctx context.Context, runID string) string {
	for range 16 {
		r, err := e.o.Store.GetRun(ctx, runID)
		if err != nil || r.ParentID == "" {
			return runID
		}
		runID = r.ParentID
	}
	return runID
}

// cancelCause normalizes a cancellation's cause as Cancel records it.
func cancelCause(cause error) error {
	switch {
	case cause == nil:
		return errCancelledByUser
	case fault.CodeOf(cause) != fault.Cancelled && !errors.Is(cause, ErrSuspend):
		return &fault.Error{Code: fault.Cancelled, Err: cause}
	}
	return cause
}

// endTimedWaits ends now the waits of the run's parked steps that end at
// a moment, for a run a resume woke early (state.Run.WokenEarly: the
// runbook serve API's resume of a parked run): a retry's delay at once
// (the next attempt starts); a sleep or a cloud task's poll when the step,
// run again, waits for that moment (WokenEarly). Approvals and
// sub-playbook runs are waited for still.
func (rs *runState) endTimedWaits() {
	now := rs.e.o.Clock.Now()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, rec := range rs.records {
		if rec.Status != state.StepWaiting {
			continue
		}
		if rec.NextAttemptAt.After(now) {
			rec.NextAttemptAt = now
		}
		if rec.WakeAt.After(now) {
			if rs.early == nil {
				rs.early = map[string]time.Time{}
			}
			rs.early[id] = rec.WakeAt
		}
	}
}

// WokenEarly implements steps.Waker: a wait until until ends now when
// its step was parked until then or later and its run was woken early.
// A later wait (a task's next poll) waits.
func (h *host) WokenEarly(until time.Time) bool {
	rs := h.sr.rs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	at, ok := rs.early[h.sr.rec.ID]
	if !ok || until.After(at) {
		return false
	}
	delete(rs.early, h.sr.rec.ID)
	return true
}
