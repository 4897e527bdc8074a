package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// stepRun is one step, or one for_each item, being run within a run. It
// owns the step's record: its condition, params, attempts and final
// status, and the record's writes. It buffers the step's events until the
// next write, so that a step costs one transaction when it does not
// checkpoint or mutate.
type stepRun struct {
	rs  *runState
	st  *playbook.Step // nil when the run ends a waiting record (endWaiting)
	rec *state.StepRecord
	it  *item // the for_each element; nil for a step
	ph  phase

	// lazy defers the record's writes to the run's next write: skips, the
	// attempts of pure steps, which a resume recomputes identically, and
	// those of idempotent ones, which a resume repeats to no further
	// effect, until shown.
	lazy bool
	// shown: an idempotent step's attempt ran for ShownAfter or waits to
	// be tried again: its records are written as a step's that is not
	// lazy (see deferred).
	shown atomic.Bool
	// continuing: this attempt goes on with a suspended one (a waiting
	// approval): same attempt number, no new step.started.
	continuing bool
	// child: the attempt ran a sub-playbook (Host.RunPlaybook).
	child bool
	// chained: the step runs alone on its list's goroutine (runList), or
	// is an item of a for_each running one item at a time, so what
	// follows its end is the next step's start or another write of the
	// run: its end is held for that write (holdEnd), which makes a chain
	// of steps cost one commit per step.
	chained bool

	// agentIntent is the unresolved intent an attempt on an agent
	// reconciles there (agent.go).
	agentIntent *steps.Intent

	mu      sync.Mutex // guards rec against the step's own Host calls, pending and printed
	pending []state.Event
	// printed is the output an attempt left for the step's next write
	// (endOutput).
	printed []state.OutputLine
}

// newStep returns the stepRun of st's record id (created in memory if
// new); it is the element of a for_each item's record, nil for the step's
// own.
func (rs *runState) newStep(st *playbook.Step, id string, it *item, ph phase, chained bool) *stepRun {
	return &stepRun{rs: rs, st: st, rec: rs.record(id), it: it, ph: ph, chained: chained}
}

// stepPending is the status of a step left unstarted for a resume.
const stepPending = state.StepPending

// run takes the step (or item) through its condition, its params and its
// attempts to a status.
func (sr *stepRun) run(ctx context.Context) state.StepStatus {
	st, rec := sr.st, sr.rec
	if finished(rec) {
		return rec.Status
	}
	run, err := sr.shouldRun(ctx)
	if err != nil {
		return sr.finish(ctx, nil, &fault.Error{Code: fault.Invalid, Message: "if: " + err.Error()})
	}
	if !run {
		why := "condition is false"
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errRunTimeout) {
			return stepPending // not started: a resume runs it
		} else if ctx.Err() != nil {
			why = "run timed out"
		} else if st.If == nil {
			why = "an earlier step failed"
		}
		return sr.skip(ctx, why)
	}
	params, extra, err := sr.params()
	if err != nil {
		return sr.finish(ctx, nil, err)
	}
	sr.lazy = (st.Desc.Pure || st.Desc.Idempotent) && st.RunsOn == nil // an agent's attempt is on record before it is sent
	// A step parked between two attempts (NextAttemptAt) starts the next.
	sr.continuing = rec.Status == state.StepWaiting && rec.Attempts > 0 && rec.NextAttemptAt.IsZero()
	return sr.attempts(ctx, params, extra)
}

// shouldRun evaluates the step's `if` (implicitly success()).
func (sr *stepRun) shouldRun(ctx context.Context) (bool, error) {
	rs, st := sr.rs, sr.st
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	if st.If == nil {
		if sr.ph != phaseMain {
			return ctx.Err() == nil, nil
		}
		return !rs.failed && ctx.Err() == nil, nil
	}
	sc := rs.scope(sr.it)
	// Handlers run on a context of their own: the run's status tells them
	// it was cancelled.
	sc.Cancelled = sc.Cancelled || ctx.Err() != nil && !errors.Is(context.Cause(ctx), errRunTimeout)
	ok, err := st.If.EvalBool(sc)
	if err != nil {
		return false, err
	}
	if !st.If.UsesStatusFunc() && ((sr.ph == phaseMain && rs.failed) || ctx.Err() != nil) {
		return false, nil
	}
	return ok, nil
}

// params evaluates `with` and decodes it into the step's params struct;
// values computed by expressions get the same checks literals got at load.
// A `with` without expressions was decoded at load (playbook.Step.Decoded).
func (sr *stepRun) params() (any, map[string]any, error) {
	rs, st := sr.rs, sr.st
	if d := st.Decoded; d != nil {
		return d.Params, d.Extra, nil
	}
	with := make(map[string]any, len(st.With))
	rs.mu.RLock()
	err := rs.evalInto(with, "with", st.With, rs.scope(sr.it))
	rs.mu.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	if st.Desc.OutputsFromWith {
		return nil, with, nil
	}
	params, extra, problems := st.Desc.Decode(with)
	if len(problems) > 0 {
		for i := range problems {
			problems[i].Message = rs.e.o.Redactor.String(problems[i].Message)
		}
		return nil, nil, fault.ProblemsError(st.ID, problems)
	}
	return params, extra, nil
}

// outputs registers the step's secret outputs with the Redactor and adds
// its named `outputs:` expressions to its result raw.
func (sr *stepRun) outputs(raw map[string]any) (map[string]any, error) {
	rs, st := sr.rs, sr.st
	for _, name := range st.Desc.SecretOutputs {
		if v, ok := raw[name].(string); ok && v != "" {
			rs.e.o.Redactor.Add(v)
		}
	}
	if len(st.Outputs) == 0 {
		return raw, nil
	}
	out := make(map[string]any, len(raw)+len(st.Outputs))
	for k, v := range raw {
		out[k] = v
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	sc := rs.scope(sr.it)
	sc.Result = raw
	if err := rs.evalInto(out, "outputs", st.Outputs, sc); err != nil {
		return nil, err
	}
	return out, nil
}

// skip records the step as skipped for reason why. The write is deferred:
// a resume decides the same skip again.
func (sr *stepRun) skip(ctx context.Context, why string) state.StepStatus {
	rec := sr.rec
	rec.Status = state.StepSkipped
	rec.EndedAt = sr.rs.e.o.Clock.Now()
	sr.lazy = true
	sr.save(ctx, state.Event{Type: "step.skipped", Step: rec.ID, Message: why})
	sr.rs.publish(rec)
	return state.StepSkipped
}

// finish records the step's final outcome: succeeded with out when err is
// nil, else failed (or cancelled when the run's context ended).
func (sr *stepRun) finish(ctx context.Context, out map[string]any, err error) state.StepStatus {
	rs, rec := sr.rs, sr.rec
	now := rs.e.o.Clock.Now()
	rec.EndedAt = now
	rec.NextAttemptAt, rec.WakeAt = time.Time{}, time.Time{}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = now
	}
	ev := state.Event{Step: rec.ID, Attempt: rec.Attempts, Data: map[string]any{"duration_ms": now.Sub(rec.StartedAt).Milliseconds()}}
	switch {
	case err == nil:
		rec.Status, rec.Error = state.StepSucceeded, nil
		rec.Outputs = rs.e.redactMap(out)
		ev.Type, ev.Message = "step.succeeded", "succeeded"
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrSuspend):
		// Not the step's failure: it runs again when the run resumes.
		rec.Status, rec.Error = state.StepCancelled, nil
		ev.Type, ev.Message = "step.suspended", "suspended: this process is stopping; the step runs again when the run resumes"
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), errRunTimeout) && fault.CodeOf(err) != fault.Timeout:
		rec.Status = state.StepCancelled
		rec.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: "cancelled"}
		ev.Type, ev.Message = "step.cancelled", "cancelled"
	default:
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), errRunTimeout) {
			err = &fault.Error{Code: fault.Timeout, Message: "run timed out", Err: err}
		}
		rec.Status = state.StepFailed
		rec.Error = rs.errorRecord(err)
		ev.Type, ev.Message = "step.failed", rec.Error.Message
		ev.Data["code"] = rec.Error.Code
	}
	if sr.chained && !sr.deferred() {
		sr.holdEnd(ctx, ev)
	} else {
		sr.save(ctx, ev)
	}
	rs.publish(rec)
	return rec.Status
}

// maxPending is the number of buffered events that forces a write.
const maxPending = 64

// hasPending reports whether events or output wait for the next write.
func (sr *stepRun) hasPending() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return len(sr.pending) > 0 || len(sr.printed) > 0
}

// endOutput closes an attempt's output and keeps its last lines for the
// step's next write, which stores them with the record (Printed).
func (sr *stepRun) endOutput(o *stepOutput) {
	lines := o.close()
	if len(lines) == 0 {
		return
	}
	sr.mu.Lock()
	sr.printed = append(sr.printed, lines...)
	sr.mu.Unlock()
}

// recordLocked returns a copy of the step's record to write, with the
// output waiting for it. sr.mu is held.
func (sr *stepRun) recordLocked() state.StepRecord {
	rec := *sr.rec
	rec.Printed, sr.printed = sr.printed, nil
	return rec
}

// queue buffers an event for the next write and shows it now.
func (sr *stepRun) queue(ev state.Event) {
	ev = sr.prepare(ev)
	sr.mu.Lock()
	sr.pending = append(sr.pending, ev)
	flush := len(sr.pending) >= maxPending
	sr.mu.Unlock()
	sr.rs.e.observe(sr.rs.run.ID, ev)
	if flush {
		sr.save(context.Background())
	}
}

func (sr *stepRun) prepare(ev state.Event) state.Event {
	if ev.Time.IsZero() {
		ev.Time = sr.rs.e.o.Clock.Now()
	}
	ev.Message = sr.rs.e.o.Redactor.String(ev.Message)
	if ev.Data != nil {
		ev.Data = sr.rs.e.redactMap(ev.Data)
	}
	return ev
}

// holdEnd keeps the step's final record and ev for the run's next write:
// the start of the step that follows, which is then on record with it in
// one commit, or the run's own write (rs.holdEnd says what writes it).
func (sr *stepRun) holdEnd(ctx context.Context, ev state.Event) {
	ev = sr.prepare(ev)
	sr.mu.Lock()
	// Room for the event of the write that takes it (the next step's
	// start), which appends to it.
	all := append(make([]state.Event, 0, len(sr.pending)+2), sr.pending...)
	all = append(all, ev)
	sr.pending = nil
	rec := sr.recordLocked()
	sr.mu.Unlock()
	sr.rs.holdEnd(ctx, &rec, all)
	sr.rs.e.observe(sr.rs.run.ID, ev)
}

// deferred reports whether the step's records wait for the run's next
// write (lazy, and not shown).
func (sr *stepRun) deferred() bool { return sr.lazy && !sr.shown.Load() }

// ShownAfter is how long an attempt of an idempotent step runs before its
// start is put on record (steps.Descriptor.Idempotent): a step that
// takes longer shows running in the API, runs show and the UI, as any
// step does; a quicker one costs the run no write of its own.
const ShownAfter = 200 * time.Millisecond

// showAfter puts the step's running record on record if the attempt still
// runs after d. The returned stop, called when the attempt has returned,
// waits for a write begun meanwhile, so that the step's end is written
// after its start.
func (sr *stepRun) showAfter(ctx context.Context, d time.Duration) (stop func()) {
	var mu sync.Mutex
	stopped := false
	t := time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			sr.show(ctx)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// show writes the step's record now, with its buffered events, and every
// later record of it as a step's that is not lazy.
func (sr *stepRun) show(ctx context.Context) {
	if sr.shown.Swap(true) {
		return
	}
	sr.save(ctx)
}

// save writes the record with every buffered event and evs, in one
// transaction (or defers it, for a lazy record). A failed write is logged:
// the run goes on, and a resume will redo the step.
func (sr *stepRun) save(ctx context.Context, evs ...state.Event) {
	for i := range evs {
		evs[i] = sr.prepare(evs[i])
	}
	rs := sr.rs
	sr.mu.Lock()
	all := append(sr.pending, evs...)
	sr.pending = nil
	rec := sr.recordLocked()
	sr.mu.Unlock()
	if sr.deferred() {
		rs.deferWrite(ctx, &rec, all)
	} else {
		rs.write(ctx, &rec, all)
	}
	if rs.fenced() != nil || ctx.Err() != nil && stoppedUnwritten(context.Cause(ctx)) {
		return // refused, never on record: not shown as if it happened either
	}
	for _, ev := range evs {
		rs.e.observe(rs.run.ID, ev)
	}
}
