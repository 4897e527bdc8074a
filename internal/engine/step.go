package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// item is one for_each element.
type item struct {
	value any
	index int
}

// maxItems bounds the elements of one for_each.
const maxItems = 10000

// runStep runs one step of a list to a final status and publishes it to
// the scope of later steps. It reports whether the step is settled (its
// dependents may start): waiting steps and steps left for a resume are not.
func (rs *runState) runStep(ctx context.Context, st *playbook.Step, ph phase) bool {
	rs.mu.RLock()
	rec := rs.records[st.ID]
	rs.mu.RUnlock()
	if finished(rec) {
		return true // finished in an earlier process
	}
	if skip, why := rs.blockedByNeeds(st); skip {
		rs.finishSkipped(ctx, st.ID, why)
		return true
	}
	var status state.StepStatus
	if st.ForEach != nil {
		status = rs.runForEach(ctx, st, ph)
	} else {
		status = rs.runSingle(ctx, st, st.ID, nil, ph)
	}
	if status == state.StepFailed && !st.ContinueOnError {
		rs.mu.Lock()
		rs.failed = true
		rs.mu.Unlock()
	}
	return status.Done() && status != state.StepCancelled
}

// stepPending is the status of a step left unstarted for a resume.
const stepPending = state.StepPending

// blockedByNeeds reports whether a step with explicit needs must be skipped
// because one of them did not succeed (unless its `if` uses a status
// function, which then decides).
func (rs *runState) blockedByNeeds(st *playbook.Step) (bool, string) {
	if st.Needs == nil || (st.If != nil && st.If.UsesStatusFunc()) {
		return false, ""
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	for _, need := range st.Needs {
		ss := rs.scopeStep[need]
		if ss == nil {
			continue
		}
		switch ss.Status {
		case string(state.StepSucceeded):
		case string(state.StepFailed):
			if rs.continues(need) {
				continue
			}
			return true, fmt.Sprintf("needed step %s failed", need)
		default:
			return true, fmt.Sprintf("needed step %s was %s", need, ss.Status)
		}
	}
	return false, ""
}

func (rs *runState) continues(id string) bool {
	for _, s := range rs.allSteps() {
		if s.ID == id {
			return s.ContinueOnError
		}
	}
	return false
}

// shouldRun evaluates the step's `if` (implicitly success()).
func (rs *runState) shouldRun(ctx context.Context, st *playbook.Step, it *item, ph phase) (bool, error) {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	if st.If == nil {
		if ph != phaseMain {
			return ctx.Err() == nil, nil
		}
		return !rs.failed && ctx.Err() == nil, nil
	}
	sc := rs.scope(it)
	// Handlers run on a context of their own: the run's status tells them
	// it was cancelled.
	sc.Cancelled = sc.Cancelled || ctx.Err() != nil && !errors.Is(context.Cause(ctx), errRunTimeout)
	ok, err := st.If.EvalBool(sc)
	if err != nil {
		return false, err
	}
	if !st.If.UsesStatusFunc() && ((ph == phaseMain && rs.failed) || ctx.Err() != nil) {
		return false, nil
	}
	return ok, nil
}

func (rs *runState) runForEach(ctx context.Context, st *playbook.Step, ph phase) state.StepStatus {
	rec := rs.record(st.ID)
	if rec.StartedAt.IsZero() {
		rec.StartedAt = rs.e.o.Clock.Now()
	}
	rs.mu.RLock()
	v, err := rs.eval(st.ForEach, rs.scope(nil))
	rs.mu.RUnlock()
	var items []any
	if err == nil {
		items, err = forEachItems(v)
	}
	if err != nil {
		return rs.finishStep(ctx, rec, nil, &fault.Error{Code: fault.Invalid, Message: "for_each: " + err.Error()}, nil)
	}
	limit := st.MaxParallel
	if limit <= 0 {
		limit = 1
	}
	results := make([]map[string]any, len(items))
	statuses := make([]state.StepStatus, len(items))
	var mu sync.Mutex
	stop := false
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, v := range items {
		sem <- struct{}{}
		mu.Lock()
		halt := stop
		mu.Unlock()
		if halt {
			<-sem
			break
		}
		wg.Add(1)
		go func(i int, v any) {
			defer wg.Done()
			defer func() { <-sem }()
			id := itemID(st.ID, i)
			status := rs.runSingle(ctx, st, id, &item{value: v, index: i}, ph)
			rs.mu.RLock()
			out := rs.records[id].Outputs
			rs.mu.RUnlock()
			mu.Lock()
			results[i], statuses[i] = out, status
			if status == state.StepFailed || status == state.StepCancelled {
				stop = true
			}
			mu.Unlock()
		}(i, v)
	}
	wg.Wait()

	outs := make([]any, len(items))
	final := state.StepSkipped
	var firstErr *state.ErrorRecord
	for i, s := range statuses {
		if results[i] != nil {
			outs[i] = results[i]
		} else {
			outs[i] = map[string]any{}
		}
		switch {
		case s == state.StepFailed && final != state.StepCancelled:
			final = state.StepFailed
			if firstErr == nil {
				firstErr = rs.records[itemID(st.ID, i)].Error
			}
		case s == state.StepCancelled || s == stepPending:
			final = state.StepCancelled
		case s == state.StepWaiting && final != state.StepFailed && final != state.StepCancelled:
			final = state.StepWaiting
		case s == state.StepSucceeded && final == state.StepSkipped:
			final = state.StepSucceeded
		case s == "":
			// never started after an earlier item failed
		}
	}
	if len(items) == 0 {
		final = state.StepSucceeded
	}
	out := map[string]any{"items": outs, "count": len(items)}
	switch final {
	case state.StepFailed:
		msg := "an item failed"
		if firstErr != nil {
			msg = firstErr.Message
		}
		return rs.finishStep(ctx, rec, out, &fault.Error{Code: fault.Code(firstErr.Code), Message: msg}, nil)
	case state.StepCancelled:
		return rs.finishStep(ctx, rec, out, context.Canceled, nil)
	case state.StepWaiting:
		rs.mu.Lock()
		rs.waiting = true
		rs.mu.Unlock()
		return state.StepWaiting
	case state.StepSkipped:
		return rs.finishSkipped(ctx, st.ID, "every item was skipped")
	}
	return rs.finishStep(ctx, rec, out, nil, nil)
}

func forEachItems(v any) ([]any, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []string:
		for _, s := range x {
			items = append(items, s)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			items = append(items, map[string]any{"key": k, "value": x[k]})
		}
	case nil:
	default:
		return nil, fmt.Errorf("must be a list or a map (got %T)", v)
	}
	if len(items) > maxItems {
		return nil, fmt.Errorf("has %d items; at most %d are allowed", len(items), maxItems)
	}
	return items, nil
}

// record returns the step's record, creating it in memory if new.
func (rs *runState) record(id string) *state.StepRecord {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rec := rs.records[id]
	if rec == nil {
		rec = &state.StepRecord{RunID: rs.run.ID, ID: id, Status: state.StepPending}
		rs.records[id] = rec
	}
	return rec
}

// runSingle runs one step or one for_each item through its attempts.
func (rs *runState) runSingle(ctx context.Context, st *playbook.Step, id string, it *item, ph phase) state.StepStatus {
	rec := rs.record(id)
	if finished(rec) {
		return rec.Status
	}
	run, err := rs.shouldRun(ctx, st, it, ph)
	if err != nil {
		return rs.finishStep(ctx, rec, nil, &fault.Error{Code: fault.Invalid, Message: "if: " + err.Error()}, nil)
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
		return rs.finishSkipped(ctx, id, why)
	}
	params, extra, err := rs.params(st, it)
	if err != nil {
		return rs.finishStep(ctx, rec, nil, err, nil)
	}
	sr := &stepRun{rs: rs, st: st, rec: rec, lazy: st.Desc.Pure}
	sr.continuing = rec.Status == state.StepWaiting && rec.Attempts > 0
	for {
		attempt := rec.Attempts + 1
		if sr.continuing {
			attempt = rec.Attempts
		}
		if wait := rec.NextAttemptAt.Sub(rs.e.o.Clock.Now()); !rec.NextAttemptAt.IsZero() && wait > 0 {
			if err := rs.e.o.Clock.Sleep(ctx, wait); err != nil {
				return rs.finishStep(ctx, rec, nil, err, sr)
			}
		}
		out, err := sr.attempt(ctx, attempt, params, extra, it)
		continuing := sr.continuing
		sr.continuing = false
		if errors.Is(err, fault.ErrSuspended) {
			rs.mu.Lock()
			rs.waiting = true
			rs.mu.Unlock()
			rec.Status = state.StepWaiting
			switch {
			case !continuing:
				sr.save(ctx, state.Event{Type: "step.waiting", Step: id, Attempt: attempt, Message: "waiting for approval"})
			case sr.hasPending():
				sr.save(ctx)
			}
			return state.StepWaiting
		}
		if err == nil {
			for _, name := range st.Desc.SecretOutputs {
				if v, ok := out[name].(string); ok && v != "" {
					rs.e.o.Redactor.Add(v)
				}
			}
			out, err = rs.stepOutputs(st, it, out)
			if err == nil {
				return rs.finishStep(ctx, rec, out, nil, sr)
			}
		}
		if ctx.Err() != nil {
			return rs.finishStep(ctx, rec, nil, err, sr)
		}
		delay, retry := rs.retryDelay(st, rec, err)
		if !retry {
			return rs.finishStep(ctx, rec, nil, err, sr)
		}
		rec.NextAttemptAt = rs.e.o.Clock.Now().Add(delay)
		rec.Error = rs.errorRecord(err)
		sr.save(ctx, state.Event{Type: "step.retry", Step: id, Attempt: attempt,
			Message: fmt.Sprintf("attempt %d failed: %s; retrying in %s", attempt, rec.Error.Message, delay.Round(time.Millisecond)),
			Data:    map[string]any{"delay_ms": delay.Milliseconds(), "code": rec.Error.Code}})
		if err := rs.e.o.Clock.Sleep(ctx, delay); err != nil {
			return rs.finishStep(ctx, rec, nil, err, sr)
		}
	}
}

// params evaluates `with` and decodes it into the step's params struct;
// values computed by expressions get the same checks literals got at load.
func (rs *runState) params(st *playbook.Step, it *item) (any, map[string]any, error) {
	rs.mu.RLock()
	sc := rs.scope(it)
	with := make(map[string]any, len(st.With))
	var err error
	for k, v := range st.With {
		if with[k], err = rs.eval(v, sc); err != nil {
			rs.mu.RUnlock()
			return nil, nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("with.%s: %v", k, err)}
		}
	}
	rs.mu.RUnlock()
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

// stepOutputs adds the step's named `outputs:` expressions to its result.
func (rs *runState) stepOutputs(st *playbook.Step, it *item, raw map[string]any) (map[string]any, error) {
	if len(st.Outputs) == 0 {
		return raw, nil
	}
	out := make(map[string]any, len(raw)+len(st.Outputs))
	for k, v := range raw {
		out[k] = v
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	sc := rs.scope(it)
	sc.Result = raw
	for k, v := range st.Outputs {
		val, err := rs.eval(v, sc)
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("outputs.%s: %v", k, err)}
		}
		out[k] = val
	}
	return out, nil
}

// retryDelay decides whether the failed attempt is retried, and after how
// long: delay x backoff^(n-1), capped by max_delay, with equal jitter.
func (rs *runState) retryDelay(st *playbook.Step, rec *state.StepRecord, err error) (time.Duration, bool) {
	r := st.Retry
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

func (rs *runState) finishSkipped(ctx context.Context, id, why string) state.StepStatus {
	rec := rs.record(id)
	rec.Status = state.StepSkipped
	rec.EndedAt = rs.e.o.Clock.Now()
	sr := &stepRun{rs: rs, rec: rec, lazy: true}
	sr.save(ctx, state.Event{Type: "step.skipped", Step: id, Message: why})
	rs.publish(rec)
	return state.StepSkipped
}

// finishStep records a step's final outcome: succeeded with out when err is
// nil, else failed (or cancelled when the run's context ended).
func (rs *runState) finishStep(ctx context.Context, rec *state.StepRecord, out map[string]any, err error, sr *stepRun) state.StepStatus {
	if sr == nil {
		sr = &stepRun{rs: rs, rec: rec}
	}
	now := rs.e.o.Clock.Now()
	rec.EndedAt = now
	rec.NextAttemptAt = time.Time{}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = now
	}
	ev := state.Event{Step: rec.ID, Attempt: rec.Attempts, Data: map[string]any{"duration_ms": now.Sub(rec.StartedAt).Milliseconds()}}
	switch {
	case err == nil:
		rec.Status, rec.Error = state.StepSucceeded, nil
		rec.Outputs = rs.e.redactMap(out)
		ev.Type, ev.Message = "step.succeeded", "succeeded"
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
	sr.save(ctx, ev)
	rs.publish(rec)
	return rec.Status
}

// publish makes a finished step visible to later expressions.
func (rs *runState) publish(rec *state.StepRecord) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.records[rec.ID] = rec
	if isItem(rec.ID) {
		return
	}
	rs.scopeStep[rec.ID] = stepState(rec)
}

func isItem(id string) bool {
	return len(id) > 0 && id[len(id)-1] == ']'
}

// stringify renders a value as a string: strings as is, others as JSON.
func stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
