package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// attempts runs the step's attempts until one settles it: it succeeds,
// fails without a retry, suspends on an approval, or the run's context
// ends. Between attempts it waits the retry's delay, recorded in the
// record (NextAttemptAt) so that a resumed run waits only what is left.
func (sr *stepRun) attempts(ctx context.Context, params any, extra map[string]any) state.StepStatus {
	rec, clock := sr.rec, sr.rs.e.o.Clock
	for {
		attempt := rec.Attempts + 1
		if sr.continuing {
			attempt = rec.Attempts
		}
		if wait := rec.NextAttemptAt.Sub(clock.Now()); !rec.NextAttemptAt.IsZero() && wait > 0 {
			if sr.parks(wait) { // woken before its retry is due: park again
				return sr.park(ctx, rec.Attempts, true, &steps.Suspended{Until: rec.NextAttemptAt, Why: "retry"})
			}
			if err := sr.sleep(ctx, wait); err != nil {
				return sr.finish(ctx, nil, err)
			}
		}
		out, err := sr.attempt(ctx, attempt, params, extra)
		if errors.Is(err, errPaused) {
			// Not started: unsettled (its dependents wait too), its record
			// as it was, started when the run is woken (pause.go).
			return state.StepWaiting
		}
		continuing := sr.continuing
		sr.continuing = false
		if errors.Is(err, fault.ErrSuspended) {
			var parked *steps.Suspended
			if errors.As(err, &parked) {
				return sr.park(ctx, attempt, continuing, parked)
			}
			return sr.suspend(ctx, attempt, continuing)
		}
		if err == nil {
			if out, err = sr.outputs(out); err == nil {
				return sr.finish(ctx, out, nil)
			}
		}
		if ctx.Err() != nil {
			return sr.finish(ctx, nil, err)
		}
		delay, retry := sr.retryDelay(err)
		if !retry {
			return sr.finish(ctx, nil, err)
		}
		if err := sr.retryAfter(ctx, attempt, err, delay); err != nil {
			var parked *steps.Suspended
			if errors.As(err, &parked) {
				return sr.park(ctx, attempt, true, parked) // step.retry said when
			}
			return sr.finish(ctx, nil, err)
		}
	}
}

// suspend leaves the step waiting for an approval; the run parks or waits
// (see runMain). A continued attempt announces nothing new.
func (sr *stepRun) suspend(ctx context.Context, attempt int, continuing bool) state.StepStatus {
	sr.rs.setWaiting()
	sr.rec.Status = state.StepWaiting
	switch {
	case !continuing:
		sr.save(ctx, state.Event{Type: "step.waiting", Step: sr.rec.ID, Attempt: attempt, Message: "waiting for approval"})
	case sr.hasPending():
		sr.save(ctx)
	}
	return state.StepWaiting
}

// retryAfter records that attempt failed with err and when the next one
// starts, then waits delay (an error: the run's context ended), or, when
// the run parks waits that long, returns a *steps.Suspended at once.
func (sr *stepRun) retryAfter(ctx context.Context, attempt int, err error, delay time.Duration) error {
	rec, clock := sr.rec, sr.rs.e.o.Clock
	rec.NextAttemptAt = clock.Now().Add(delay)
	rec.Error = sr.rs.errorRecord(err)
	if sr.st.Desc.Idempotent {
		sr.shown.Store(true) // on record while it waits, as any step
	}
	sr.save(ctx, state.Event{Type: "step.retry", Step: rec.ID, Attempt: attempt,
		Message: fmt.Sprintf("attempt %d failed: %s; retrying in %s", attempt, rec.Error.Message, delay.Round(time.Millisecond)),
		Data:    map[string]any{"delay_ms": delay.Milliseconds(), "code": rec.Error.Code}})
	if sr.parks(delay) {
		return &steps.Suspended{Until: rec.NextAttemptAt, Why: "retry"}
	}
	return sr.sleep(ctx, delay)
}

// sleep waits d between attempts, once what is due is on record.
func (sr *stepRun) sleep(ctx context.Context, d time.Duration) error {
	sr.rs.flushDue(ctx)
	return sr.rs.e.o.Clock.Sleep(ctx, d)
}

// retryDelay decides whether the failed attempt is retried, and after how
// long: delay x backoff^(n-1), capped by max_delay, with equal jitter.
func (sr *stepRun) retryDelay(err error) (time.Duration, bool) {
	rs, rec := sr.rs, sr.rec
	r := sr.st.Retry
	if r == nil || rec.Attempts >= r.Attempts {
		return 0, false
	}
	code := fault.CodeOf(err)
	if code == fault.Cancelled {
		return 0, false
	}
	if r.If != nil {
		rs.mu.RLock()
		sc := rs.scope(nil)
		er := rs.errorRecord(err)
		sc.Error = &expr.ErrorInfo{Code: er.Code, Message: er.Message, Data: er.Data, Attempt: rec.Attempts}
		ok, evalErr := r.If.EvalBool(sc)
		rs.mu.RUnlock()
		if evalErr != nil || !ok {
			return 0, false
		}
	} else if !fault.Retryable(err) {
		return 0, false
	}
	return backoff(r, rec.Attempts), true
}

func backoff(r *playbook.Retry, attempt int) time.Duration {
	factor := r.Backoff
	if factor < 1 {
		factor = 1
	}
	d := float64(r.Delay) * math.Pow(factor, float64(attempt-1))
	if r.MaxDelay > 0 && d > float64(r.MaxDelay) {
		d = float64(r.MaxDelay)
	}
	if d > float64(math.MaxInt64/2) {
		d = float64(math.MaxInt64 / 2)
	}
	delay := time.Duration(d)
	if r.Jitter && delay > 0 {
		half := delay / 2
		delay = half + time.Duration(rand.Int64N(int64(half)+1))
	}
	return delay
}

var errStepTimeout = errors.New("step timeout")

// attempt runs attempt n of the step: intent and reconcile for mutating
// steps, the step's own timeout, classification of its error.
func (sr *stepRun) attempt(ctx context.Context, n int, params any, extra map[string]any) (steps.Outputs, error) {
	rs, st, rec := sr.rs, sr.st, sr.rec
	if err := rs.mayStart(ctx); err != nil {
		return nil, err // the run goes on elsewhere: nothing starts here
	}
	if !sr.continuing && sr.ph == phaseMain {
		if err := rs.paused(); err != nil {
			return nil, err // its playbook is paused: the run parks (pause.go)
		}
	}
	sr.mu.Lock()
	stale := rec.Status == state.StepCancelled && (rec.Error != nil || !rec.EndedAt.IsZero())
	if stale {
		// Cut short by a cancellation: the run goes on, and so does the
		// step, without the stop's error or end (written at once below).
		rec.Error, rec.EndedAt = nil, time.Time{}
	}
	rec.Attempts, rec.Status, rec.WakeAt = n, state.StepRunning, time.Time{}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = rs.e.o.Clock.Now()
	}
	sr.mu.Unlock()
	parts := &callParts{host: host{sr: sr}, events: eventHandler{sr: sr, attempt: n}}
	parts.logger = *slog.New(rs.e.o.Redactor.Handler(&parts.events))
	output := &parts.output
	sr.initOutput(output, n)
	defer sr.endOutput(output)
	call := &parts.call
	*call = steps.Call{
		RunID: rs.run.ID, StepID: rec.ID, Attempt: n, Params: params, Extra: extra,
		IdempotencyKey: rs.run.ID + "/" + rec.ID,
		Resume:         rec.Checkpoint,
		Dir:            rs.pb.Dir,
		Now:            rs.e.now,
		Host:           &parts.host,
		Log:            &parts.logger,
		Output:         output,
	}
	started := state.Event{Type: "step.started", Step: rec.ID, Attempt: n, Message: attemptMessage(n)}

	switch {
	case st.Desc.Mutating:
		out, adopted, err := sr.intend(ctx, call, started)
		if adopted || err != nil {
			return out, err
		}
	case sr.continuing:
		// The record says waiting in this attempt: the attempt reads an
		// answer or polls once, then ends or waits again.
		rs.flushDue(ctx)
	case sr.deferred() && !stale:
		sr.queue(started) // computes only, or repeats to no effect: on record with its end
		if st.Desc.Idempotent {
			defer sr.showAfter(ctx, ShownAfter)() // unless it runs long
		}
	default:
		// On record, with what waits for the run's next write, before the
		// step's process or call starts: the API, runs show and the UI
		// show it running while it runs.
		sr.save(ctx, started)
	}
	if ctx.Err() != nil && stoppedUnwritten(context.Cause(ctx)) {
		return nil, context.Cause(ctx) // its start is not on record: it does not start
	}
	sctx := ctx
	if st.Timeout > 0 {
		var stop context.CancelFunc
		sctx, stop = context.WithTimeoutCause(ctx, st.Timeout, errStepTimeout)
		defer stop()
	}
	run := st.Desc.Run
	if st.RunsOn != nil {
		run = sr.onAgent
	} else if err := sr.agentSecretsHere(call); err != nil {
		return nil, err
	}
	out, err := run(steps.WatchCalls(sctx, call), call)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sctx), errStepTimeout) {
		err = &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("step timed out after %s", st.Timeout), Err: err}
	}
	if err != nil && st.Desc.Mutating && definitive(err) {
		// The call was refused: nothing to reconcile before the next attempt.
		if perr := sr.putIntent(ctx, call, nil, true); perr != nil {
			return nil, fmt.Errorf("resolve intent of %s: %w", rec.ID, perr)
		}
	}
	return out, err
}

// callParts are an attempt's call and what it points to, made in one
// allocation where they took five.
type callParts struct {
	call   steps.Call
	host   host
	events eventHandler
	logger slog.Logger
	output stepOutput
}

// attemptMessages are the messages of step.started for the first
// attempts, made once.
var attemptMessages = [...]string{"", "attempt 1", "attempt 2", "attempt 3", "attempt 4", "attempt 5"}

// attemptMessage is the message of step.started for attempt n.
func attemptMessage(n int) string {
	if n > 0 && n < len(attemptMessages) {
		return attemptMessages[n]
	}
	return "attempt " + strconv.Itoa(n)
}

// intend prepares the attempt call of a mutating step. An earlier attempt
// whose intent has no recorded outcome is reconciled first: when the
// step's Reconcile hook finds what it made, its result is adopted and no
// call is made. Otherwise the record (with started, unless the attempt
// continues) and then the new intent are written before the call.
func (sr *stepRun) intend(ctx context.Context, call *steps.Call, started state.Event) (out steps.Outputs, adopted bool, err error) {
	rs, st, rec := sr.rs, sr.st, sr.rec
	prev, err := rs.e.o.Store.GetIntent(ctx, rs.run.ID, rec.ID)
	switch {
	case err == nil && !prev.Resolved && st.Desc.Reconcile != nil && st.RunsOn != nil:
		// The service is reached from the agent: it reconciles there.
		sr.agentIntent = &steps.Intent{RunID: prev.RunID, Step: prev.Step, Attempt: prev.Attempt, IdempotencyKey: prev.Key, CreatedAt: prev.CreatedAt, Data: prev.Data}
	case err == nil && !prev.Resolved && st.Desc.Reconcile != nil:
		in := steps.Intent{RunID: prev.RunID, Step: prev.Step, Attempt: prev.Attempt, IdempotencyKey: prev.Key, CreatedAt: prev.CreatedAt, Data: prev.Data}
		rs.flushDue(ctx) // reconciling calls the service
		out, found, err := st.Desc.Reconcile(ctx, call, in)
		if err != nil {
			return nil, false, fmt.Errorf("reconcile %s: %w", rec.ID, err)
		}
		if found {
			sr.queue(state.Event{Type: "step.reconciled", Step: rec.ID, Attempt: call.Attempt,
				Message: fmt.Sprintf("adopted the result of attempt %d (made before an interruption)", prev.Attempt)})
			return out, true, nil
		}
	case err != nil && !errors.Is(err, state.ErrNotFound):
		return nil, false, fmt.Errorf("read intent of %s: %w", rec.ID, err)
	}
	if sr.continuing {
		sr.save(ctx)
	} else {
		sr.save(ctx, started)
	}
	if err := sr.putIntent(ctx, call, rec.Checkpoint, false); err != nil {
		return nil, false, fmt.Errorf("record intent of %s: %w", rec.ID, err)
	}
	return nil, false, nil
}

// putIntent writes the intent of call, resolved or not, even when the
// run's context has ended.
func (sr *stepRun) putIntent(ctx context.Context, call *steps.Call, data []byte, resolved bool) error {
	in := state.Intent{RunID: call.RunID, Step: call.StepID, Attempt: call.Attempt, Key: call.IdempotencyKey,
		CreatedAt: sr.rs.e.o.Clock.Now(), Data: data, Resolved: resolved}
	rs := sr.rs
	rs.flushDue(ctx) // a run's deferred start is on record before its side effects
	if err := rs.fenced(); err != nil {
		return err // no intent, so no call
	}
	return rs.refused(rs.e.o.Store.PutIntent(rs.fence.onto(context.WithoutCancel(ctx)), in))
}

// definitive reports whether an error proves the mutating call had no
// effect (or a known one), so the next attempt need not reconcile.
func definitive(err error) bool {
	switch fault.CodeOf(err) {
	case fault.Invalid, fault.NotFound, fault.Conflict, fault.Unauthorized, fault.InProgress, fault.Throttled, fault.Failed:
		return true
	}
	return false
}
