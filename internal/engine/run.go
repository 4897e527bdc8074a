package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// runState is one run being executed by this process. It owns what is the
// run's as a whole: its record and lifecycle (run.go), the order its lists
// run in (schedule.go), the scope its expressions read (scope.go), its
// concurrency key and its batched writes. Each step, and each for_each
// item, runs as a stepRun of its own (step.go).
type runState struct {
	e   *Engine
	pb  *playbook.Playbook
	run *state.Run
	// trigger is what expressions see as `trigger`: run.Trigger, with the
	// payload and hook of its stored delivery (resolveTrigger).
	trigger map[string]any

	inputs  map[string]any
	env     map[string]string
	secrets map[string]string

	mu        sync.RWMutex // guards the fields below and the maps inside scope
	scopeStep map[string]*expr.StepState
	records   map[string]*state.StepRecord
	failed    bool   // a step failed without continue_on_error
	waiting   bool   // a step is parked on an approval
	pausedBy  string // why a step did not start: its playbook is paused (pause.go)
	status    string
	asked     map[string]bool // approvals requested by this process
	wakeBy    time.Time       // earliest end of a wait (approval deadline, parked step)
	holdKey   bool            // parked: the concurrency key stays held (park.go)
	// early: the parked waits a resume ended, by step record, with the
	// moment each was due (park.go).
	early map[string]time.Time

	runMu sync.Mutex // serialises writes of the run record

	lazyMu     sync.Mutex // guards the deferred writes of pure steps
	lazy       []*state.StepRecord
	lazyEvents []state.Event
	start      []state.Event // the run's start, not written yet (Options.Host.DeferStart)
	held       bool          // lazy holds the end of a chained step (holdEnd)

	fence *fence // nil: its writes are not fenced (fence.go)

	// host is the context of the run's host: its store operations are
	// tried again while it lives (storefault.go). cancel stops the run.
	host   context.Context
	cancel context.CancelCauseFunc
	// settled: the run's last write recorded it ended or suspended; only
	// then is its concurrency key released.
	settled bool
}

// execute runs r to its end (or until it parks or is suspended). It is
// kept small: a run waiting for an approval waits in runMain, right below
// it, so what a waiting run holds on its goroutine's stack is this frame
// and runMain's (see wait.go).
func (e *Engine) execute(parent context.Context, pb *playbook.Playbook, r *state.Run, inputs map[string]any) (*state.Run, error) {
	host := hostOf(parent)
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, hostKey{}, host))
	defer cancel(nil)
	ctx, fence, unfence := e.fenceRun(ctx, r, cancel)
	defer unfence()
	if err := fence.stopped(); err != nil {
		return r, err
	}
	rs := e.newRunState(pb, r, inputs)
	rs.fence, rs.host, rs.cancel = fence, host, cancel
	early := r.WokenEarly // a resume on record; begin clears it with the run's start
	if missing := maskedSecretInputs(pb, rs.inputs); len(missing) > 0 {
		return e.holdForSecretInputs(ctx, r, missing)
	}
	if err := e.activate(r.ID, cancel); err != nil {
		return r, err
	}
	defer e.deactivate(r.ID)
	ctx, stop, out, err := rs.begin(ctx)
	defer stop()
	if out != nil || err != nil {
		return out, err
	}
	if cause := e.takeCancel(r.ID); cause != nil {
		cancel(cause) // cancelled while parked: the run ends cancelled
	}
	if early {
		rs.endTimedWaits() // resumed before its parked waits ended (park.go)
	}
	if park := rs.runMain(ctx); park {
		return rs.parkAndLeave(ctx)
	}
	return rs.end(ctx)
}

func (e *Engine) newRunState(pb *playbook.Playbook, r *state.Run, inputs map[string]any) *runState {
	if inputs == nil {
		inputs = r.Inputs
	} else if resolved, err := ResolveInputs(pb, inputs); err == nil {
		inputs = resolved
	}
	for _, in := range pb.Inputs {
		if in.Secret {
			if s, ok := inputs[in.Name].(string); ok {
				e.o.Redactor.Add(s)
			}
		}
	}
	rs := &runState{
		e: e, pb: pb, run: r, inputs: inputs, trigger: r.Trigger,
		scopeStep: map[string]*expr.StepState{},
		records:   map[string]*state.StepRecord{},
		asked:     map[string]bool{},
		status:    "running",
		host:      context.Background(),
	}
	rs.secrets = e.secretValues(pb)
	return rs
}

// activate marks run id as executing in this process (cancel cancels it).
func (e *Engine) activate(id string, cancel context.CancelCauseFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, busy := e.active[id]; busy {
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is already executing", id)}
	}
	e.active[id] = cancel
	return nil
}

func (e *Engine) deactivate(id string) {
	e.mu.Lock()
	delete(e.active, id)
	e.mu.Unlock()
}

// begin loads what earlier processes recorded, takes the run's deadline
// and concurrency key and records the run as running. It returns the
// run's context and what to release at its end; out or err are set when
// the run ends (or stops) before its steps.
func (rs *runState) begin(ctx context.Context) (_ context.Context, stop func(), out *state.Run, err error) {
	e, r := rs.e, rs.run
	stops := []func(){}
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	resumed := !r.StartedAt.IsZero()
	now := e.o.Clock.Now()
	if !resumed {
		r.StartedAt = now
		if rs.pb.Timeout > 0 {
			r.Deadline = now.Add(rs.pb.Timeout)
		}
	}
	if err := rs.loadRecords(ctx); err != nil {
		return ctx, stop, r, err
	}
	if err := rs.resolveTrigger(ctx); err != nil {
		if errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrCorrupt) {
			out, err = rs.finish(ctx, err)
			return ctx, stop, out, err
		}
		return ctx, stop, r, err
	}
	if err := rs.buildEnv(); err != nil {
		out, err = rs.finish(ctx, err)
		return ctx, stop, out, err
	}
	if !r.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, r.Deadline, errRunTimeout)
		stops = append(stops, cancel)
	}

	release, err := rs.acquireConcurrency(ctx)
	if err != nil {
		switch {
		case errors.Is(err, errParkedOnKey):
			return ctx, stop, r, nil // saved waiting for its key (concurrency.go)
		case errors.Is(err, ErrBusy):
			out, err = rs.skip(ctx, err)
		case rs.host.Err() != nil || errors.Is(err, state.ErrFenced):
			return ctx, stop, r, err // unfinished: it is resumed from its record
		default:
			out, err = rs.finish(ctx, err)
		}
		return ctx, stop, out, err
	}
	stops = append(stops, func() {
		if !rs.keepsKey() {
			release()
		}
	})

	r.Status, r.Owner, r.Error, r.WakeAt, r.AnswerOnly, r.Paused, r.WokenEarly = state.RunRunning, e.o.Process, nil, time.Time{}, false, "", false
	evType, msg := "run.started", "run started"
	if resumed {
		evType, msg = "run.resumed", "run resumed"
	}
	if e.o.Host.DeferStart && !resumed {
		rs.lazyMu.Lock()
		rs.start = []state.Event{{Time: now, Type: evType, Message: msg}}
		rs.lazyMu.Unlock()
		return ctx, stop, nil, nil
	}
	ev := state.Event{Time: now, Type: evType, Message: msg}
	err = rs.saveRun(ctx, ev)
	if recordedCancel(err) != nil {
		err = rs.saveRun(ctx, ev) // recorded cancelled meanwhile: it goes on to end cancelled
	}
	if cause := runCause(ctx); err != nil && stoppedUnwritten(cause) {
		out, err = rs.finish(ctx, cause) // its start could not be written
		return ctx, stop, out, err
	}
	if err != nil {
		return ctx, stop, r, err
	}
	return ctx, stop, nil, nil
}

// end runs on_failure and finally as the outcome requires and finishes
// the run.
func (rs *runState) end(ctx context.Context) (*state.Run, error) {
	if err := rs.fenced(); err != nil {
		return rs.run, err // nothing more runs or is written here
	}
	pb := rs.pb
	rs.mu.RLock()
	failed := rs.failed
	rs.mu.RUnlock()
	cause := runCause(ctx)
	if failed && cause == nil && len(pb.OnFailure) > 0 {
		rs.setStatus("failed")
		rs.runList(ctx, pb.OnFailure, phaseOnFailure)
	}
	if len(pb.Finally) > 0 && !errors.Is(cause, ErrSuspend) && !stoppedUnwritten(cause) {
		fctx := ctx
		if cause != nil {
			// finally steps still run after a cancellation or timeout, with
			// a bounded grace period of their own.
			var stop context.CancelFunc
			fctx, stop = context.WithTimeout(context.WithoutCancel(ctx), finallyGrace)
			defer stop()
		}
		rs.setStatus(rs.outcome(cause))
		rs.runList(fctx, pb.Finally, phaseFinally)
	}
	return rs.finish(ctx, cause)
}

const finallyGrace = 5 * time.Minute

var errRunTimeout = &fault.Error{Code: fault.Timeout, Message: "run timed out"}

// runCause returns why ctx ended (nil while it runs).
func runCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

func (rs *runState) outcome(cause error) string {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	switch {
	case cause != nil && errors.Is(cause, errRunTimeout):
		return "failed"
	case cause != nil:
		return "cancelled"
	case rs.failed:
		return "failed"
	}
	return "succeeded"
}

func (rs *runState) setStatus(s string) {
	rs.mu.Lock()
	rs.status = s
	rs.mu.Unlock()
}

// loadRecords reads the records an earlier process persisted, so finished
// steps are not run again and their outputs are in scope.
func (rs *runState) loadRecords(ctx context.Context) error {
	var recs []*state.StepRecord
	err := rs.stored(func() (err error) {
		recs, err = rs.e.o.Store.Steps(ctx, rs.run.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("load steps of run %s: %w", rs.run.ID, err)
	}
	if rs.run.RetryOf != "" {
		// A crash may have come between the retry's creation and the
		// copy of the records it reuses: copy what is missing first.
		copied, err := rs.e.copyReused(ctx, rs.pb, rs.run, recordsByID(recs))
		if err != nil {
			return err
		}
		recs = append(recs, copied...)
	}
	failedIDs := map[string]bool{}
	for _, s := range rs.allSteps() {
		if !s.ContinueOnError {
			failedIDs[s.ID] = true
		}
	}
	handlers := map[string]bool{}
	if rs.run.Status == state.RunCancelled {
		// The handlers of a cancelled attempt run again at the real end.
		for _, s := range append(append([]*playbook.Step(nil), rs.pb.OnFailure...), rs.pb.Finally...) {
			handlers[s.ID] = true
		}
	}
	for _, rec := range recs {
		base, _, _ := strings.Cut(rec.ID, "[")
		if handlers[base] {
			continue
		}
		rs.records[rec.ID] = rec
		if strings.Contains(rec.ID, "[") {
			continue // for_each item; the step's own record carries the outputs
		}
		if finished(rec) {
			rs.scopeStep[rec.ID] = stepState(rec)
			if rec.Status == state.StepFailed && failedIDs[rec.ID] {
				rs.failed = true
			}
		}
	}
	return nil
}

func (rs *runState) allSteps() []*playbook.Step {
	all := make([]*playbook.Step, 0, len(rs.pb.Steps)+len(rs.pb.OnFailure)+len(rs.pb.Finally))
	all = append(all, rs.pb.Steps...)
	all = append(all, rs.pb.OnFailure...)
	return append(all, rs.pb.Finally...)
}

// event appends one event to the run's log now (run-level events).
func (rs *runState) event(ctx context.Context, ev state.Event) {
	if ev.Time.IsZero() {
		ev.Time = rs.e.o.Clock.Now()
	}
	ev.Message = rs.e.o.Redactor.String(ev.Message)
	rs.flushLazy(ctx)
	if rs.fenced() != nil {
		return
	}
	err := rs.stored(func() error {
		wctx, stop := rs.writeCtx(ctx)
		defer stop()
		return rs.refused(rs.e.o.Store.AppendEvents(wctx, rs.run.ID, ev))
	})
	if rs.notWritten(err) != nil {
		rs.e.o.Logger.Error("append event", "run_id", rs.run.ID, "err", err)
	}
	rs.e.observe(rs.run.ID, ev)
}

// saveRun writes the run's record with evs, and with it the records of
// pure steps kept for the next write (their events first): one commit
// where a flush and the run's write were two.
func (rs *runState) saveRun(ctx context.Context, evs ...state.Event) error {
	if err := rs.fenced(); err != nil {
		return err
	}
	rs.lazyMu.Lock()
	defer rs.lazyMu.Unlock()
	recs, all := rs.lazy, slices.Concat(rs.start, rs.lazyEvents, evs)
	observed := slices.Concat(rs.start, evs)
	start, lazyEvents := rs.start, rs.lazyEvents
	rs.lazy, rs.lazyEvents, rs.start, rs.held = nil, nil, nil, false
	rs.runMu.Lock()
	defer rs.runMu.Unlock()
	// Refused as cancelled meanwhile, evs, which said otherwise, are
	// dropped: not kept for the write that records the run cancelled.
	err := rs.stored(func() error {
		wctx, stop := rs.writeCtx(ctx)
		defer stop()
		return rs.saveRunSteps(wctx, recs, start, lazyEvents, all)
	})
	if err != nil {
		return rs.notWritten(fmt.Errorf("save run %s: %w", rs.run.ID, err))
	}
	rs.settled = rs.run.Status.Done() || rs.run.Status == state.RunSuspended
	for _, ev := range observed {
		rs.e.observe(rs.run.ID, ev)
	}
	return nil
}

func (rs *runState) skip(ctx context.Context, cause error) (*state.Run, error) {
	now := rs.e.o.Clock.Now()
	rs.run.Status, rs.run.EndedAt = state.RunSkipped, now
	rs.run.Error = &state.ErrorRecord{Code: string(fault.Conflict), Message: rs.e.o.Redactor.String(cause.Error())}
	err := rs.saveRun(ctx, state.Event{Time: now, Type: "run.skipped", Message: rs.run.Error.Message})
	if recordedCancel(err) != nil {
		err = rs.saveRun(ctx) // recorded cancelled meanwhile: it stays so
	}
	if err != nil {
		return rs.run, err
	}
	return rs.run, nil
}

// ErrSuspend, as the cause a run's context is cancelled with, stops the
// run without ending it: interrupted steps are recorded as cancelled,
// without an error (a resume runs them again; mutating ones reconcile
// first), on_failure and finally do not run, and the run is "suspended",
// without an owner, so that the next process resumes it. `runbook serve`
// suspends its runs this way at a graceful shutdown. Execute and Resume
// return it.
var ErrSuspend = errors.New("run suspended")

func (rs *runState) suspend(ctx context.Context) (*state.Run, error) {
	now := rs.e.o.Clock.Now()
	rs.run.Status, rs.run.Owner = state.RunSuspended, ""
	ev := state.Event{Time: now, Type: "run.suspended", Message: "run suspended: this process is stopping; it resumes where it stopped at the next start"}
	err := rs.saveRun(ctx, ev)
	if recordedCancel(err) != nil {
		// Recorded cancelled meanwhile: it stays so (its finally steps
		// do not run: the process is stopping).
		err = rs.saveRun(ctx)
	}
	if err != nil {
		return rs.run, err
	}
	return rs.run, ErrSuspend
}

// park persists the run as waiting, with the moment it is due to go on by
// itself (see parkNote).
func (rs *runState) park(ctx context.Context) (*state.Run, error) {
	now := rs.e.o.Clock.Now()
	rs.run.Status = state.RunWaiting
	msg := rs.parkNote()
	if err := rs.saveRun(ctx, state.Event{Time: now, Type: "run.waiting", Message: msg}); err != nil {
		return rs.run, err
	}
	return rs.run, nil
}

// finish computes the final status, evaluates the playbook's outputs and
// persists the run. cause is why the run's context ended (nil if it did
// not) or an error that stopped the run before its steps.
func (rs *runState) finish(ctx context.Context, cause error) (*state.Run, error) {
	if err := rs.fenced(); err != nil {
		return rs.run, err
	}
	if cause != nil && errors.Is(cause, ErrSuspend) {
		return rs.suspend(ctx)
	}
	r := rs.run
	now := rs.e.o.Clock.Now()
	r.EndedAt = now
	rs.mu.RLock()
	failed := rs.failed
	rs.mu.RUnlock()
	var runErr error
	switch {
	case cause != nil && errors.Is(cause, errRunTimeout):
		r.Status = state.RunFailed
		runErr = &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("run timed out after %s", rs.pb.Timeout)}
	case cause != nil && (errors.Is(cause, context.Canceled) || errors.Is(cause, errCancelledByUser) || fault.CodeOf(cause) == fault.Cancelled):
		r.Status = state.RunCancelled
		runErr = &fault.Error{Code: fault.Cancelled, Message: "run cancelled"}
	case cause != nil:
		r.Status = state.RunFailed
		runErr = cause
	case failed:
		r.Status = state.RunFailed
		runErr = rs.firstFailure()
	default:
		r.Status = state.RunSucceeded
	}
	if cause != nil && r.Status == state.RunCancelled && !errors.Is(cause, context.Canceled) {
		runErr = &fault.Error{Code: fault.Cancelled, Message: cancelledMessage(cause)}
	}
	if r.Status == state.RunSucceeded && len(rs.pb.Outputs) > 0 {
		out, err := rs.evalOutputs()
		if err != nil {
			r.Status, runErr = state.RunFailed, err
		} else {
			r.Outputs = rs.e.redactMap(out)
		}
	}
	if runErr != nil {
		r.Error = rs.errorRecord(runErr)
	}
	ev := state.Event{Time: now, Type: "run." + string(r.Status), Message: "run " + string(r.Status)}
	if r.Error != nil {
		ev.Message += ": " + r.Error.Message
	}
	if err := rs.saveRun(ctx, ev); err != nil {
		if c := recordedCancel(err); c != nil && cause != c {
			return rs.finish(ctx, c) // recorded cancelled meanwhile: it ends so
		}
		return r, err
	}
	return r, runErr
}

// cancelledMessage is the recorded message of a run cancelled with cause:
// cause's, after "run cancelled: " unless it says so already.
func cancelledMessage(cause error) string {
	msg := cause.Error()
	if !strings.HasPrefix(msg, "run cancelled") {
		msg = "run cancelled: " + msg
	}
	return msg
}

func (rs *runState) evalOutputs() (map[string]any, error) {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	out := make(map[string]any, len(rs.pb.Outputs))
	if err := rs.evalInto(out, "outputs", rs.pb.Outputs, rs.scope(nil)); err != nil {
		return nil, err
	}
	return out, nil
}

// firstFailure returns the error of the first failed step, for the run's
// error (in the order steps are written).
func (rs *runState) firstFailure() error {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	for _, s := range rs.allSteps() {
		if s.ContinueOnError {
			continue
		}
		if rec := rs.records[s.ID]; rec != nil && rec.Status == state.StepFailed && rec.Error != nil {
			return &fault.Error{Code: fault.Code(rec.Error.Code), Message: fmt.Sprintf("step %s: %s", s.ID, rec.Error.Message), Data: rec.Error.Data}
		}
	}
	return &fault.Error{Code: fault.Failed, Message: "a step failed"}
}

func (rs *runState) errorRecord(err error) *state.ErrorRecord {
	var se *fault.Error
	rec := &state.ErrorRecord{Code: string(fault.CodeOf(err)), Message: rs.e.o.Redactor.String(err.Error())}
	if errors.As(err, &se) && se.Data != nil {
		rec.Data = rs.e.redactMap(se.Data)
	}
	return rec
}

// finished reports whether a record is final for this run: a cancelled
// step runs again when the run is resumed.
func finished(rec *state.StepRecord) bool {
	return rec != nil && rec.Status.Done() && rec.Status != state.StepCancelled
}

func stepState(rec *state.StepRecord) *expr.StepState {
	ss := &expr.StepState{Outputs: rec.Outputs, Status: string(rec.Status)}
	if ss.Outputs == nil {
		ss.Outputs = map[string]any{}
	}
	if rec.Error != nil {
		ss.Error = &expr.ErrorInfo{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data, Attempt: rec.Attempts}
	}
	return ss
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

// setWaiting notes that a step waits for an approval: the run parks, or
// waits, once its list has run (see runMain).
func (rs *runState) setWaiting() {
	rs.mu.Lock()
	rs.waiting = true
	rs.mu.Unlock()
}
