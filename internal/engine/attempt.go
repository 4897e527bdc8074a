package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// stepRun is the in-flight state of one step record: it owns the record's
// writes and buffers the step's events until the next write, so that a
// step costs one transaction when it does not checkpoint or mutate.
type stepRun struct {
	rs  *runState
	st  *playbook.Step
	rec *state.StepRecord

	// lazy defers the record's writes to the run's next write (pure steps
	// and skips, which a resume recomputes identically).
	lazy bool
	// continuing: this attempt goes on with a suspended one (a waiting
	// approval): same attempt number, no new step.started.
	continuing bool

	mu      sync.Mutex
	pending []state.Event
}

// hasPending reports whether events wait for the next write.
func (sr *stepRun) hasPending() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return len(sr.pending) > 0
}

// maxPending is the number of buffered events that forces a write.
const maxPending = 64

var errStepTimeout = errors.New("step timeout")

// attempt runs one attempt of the step: intent and reconcile for mutating
// steps, the step's own timeout, classification of its error.
func (sr *stepRun) attempt(ctx context.Context, n int, params any, extra map[string]any, it *item) (steps.Outputs, error) {
	rs, st, rec := sr.rs, sr.st, sr.rec
	store := rs.e.o.Store
	sr.mu.Lock()
	rec.Attempts, rec.Status = n, state.StepRunning
	if rec.StartedAt.IsZero() {
		rec.StartedAt = rs.e.o.Clock.Now()
	}
	sr.mu.Unlock()
	call := &steps.Call{
		RunID: rs.run.ID, StepID: rec.ID, Attempt: n, Params: params, Extra: extra,
		IdempotencyKey: rs.run.ID + "/" + rec.ID,
		Resume:         rec.Checkpoint,
		Dir:            rs.pb.Dir,
		Now:            rs.e.o.Clock.Now,
		Host:           &host{sr: sr},
	}
	call.Log = slog.New(rs.e.o.Redactor.Handler(&eventHandler{sr: sr, attempt: n}))
	started := state.Event{Type: "step.started", Step: rec.ID, Attempt: n, Message: "attempt " + fmt.Sprint(n)}

	if st.Desc.Mutating {
		prev, err := store.GetIntent(ctx, rs.run.ID, rec.ID)
		switch {
		case err == nil && !prev.Resolved && st.Desc.Reconcile != nil:
			in := steps.Intent{RunID: prev.RunID, Step: prev.Step, Attempt: prev.Attempt, IdempotencyKey: prev.Key, CreatedAt: prev.CreatedAt, Data: prev.Data}
			out, found, err := st.Desc.Reconcile(ctx, call, in)
			if err != nil {
				return nil, fmt.Errorf("reconcile %s: %w", rec.ID, err)
			}
			if found {
				sr.queue(state.Event{Type: "step.reconciled", Step: rec.ID, Attempt: n,
					Message: fmt.Sprintf("adopted the result of attempt %d (made before an interruption)", prev.Attempt)})
				return out, nil
			}
		case err != nil && !errors.Is(err, state.ErrNotFound):
			return nil, fmt.Errorf("read intent of %s: %w", rec.ID, err)
		}
		if sr.continuing {
			sr.save(ctx)
		} else {
			sr.save(ctx, started)
		}
		in := state.Intent{RunID: rs.run.ID, Step: rec.ID, Attempt: n, Key: call.IdempotencyKey, CreatedAt: rs.e.o.Clock.Now(), Data: rec.Checkpoint}
		if err := store.PutIntent(context.WithoutCancel(ctx), in); err != nil {
			return nil, fmt.Errorf("record intent of %s: %w", rec.ID, err)
		}
	} else if !sr.continuing {
		sr.queue(started)
	}

	sctx := ctx
	if st.Timeout > 0 {
		var stop context.CancelFunc
		sctx, stop = context.WithTimeoutCause(ctx, st.Timeout, errStepTimeout)
		defer stop()
	}
	out, err := st.Desc.Run(sctx, call)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sctx), errStepTimeout) {
		err = &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("step timed out after %s", st.Timeout), Err: err}
	}
	if err != nil && st.Desc.Mutating && definitive(err) {
		// The call was refused: nothing to reconcile before the next attempt.
		in := state.Intent{RunID: rs.run.ID, Step: rec.ID, Attempt: n, Key: call.IdempotencyKey, CreatedAt: rs.e.o.Clock.Now(), Resolved: true}
		if perr := store.PutIntent(context.WithoutCancel(ctx), in); perr != nil {
			return nil, fmt.Errorf("resolve intent of %s: %w", rec.ID, perr)
		}
	}
	return out, err
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
	rec := *sr.rec
	sr.mu.Unlock()
	if sr.lazy {
		rs.deferWrite(ctx, &rec, all)
	} else {
		rs.write(ctx, &rec, all)
	}
	for _, ev := range evs {
		rs.e.observe(rs.run.ID, ev)
	}
}

// maxLazy bounds the records a run keeps unwritten.
const maxLazy = 256

// deferWrite keeps a record of a pure step for the run's next write.
func (rs *runState) deferWrite(ctx context.Context, rec *state.StepRecord, evs []state.Event) {
	rs.lazyMu.Lock()
	rs.lazy = append(rs.lazy, rec)
	rs.lazyEvents = append(rs.lazyEvents, evs...)
	full := len(rs.lazy) >= maxLazy
	rs.lazyMu.Unlock()
	if full {
		rs.flushLazy(ctx)
	}
}

// write persists rec (nil: only what is deferred) after every deferred
// record, in one transaction, so the store's event order is the order the
// events happened in.
func (rs *runState) write(ctx context.Context, rec *state.StepRecord, evs []state.Event) {
	rs.lazyMu.Lock()
	defer rs.lazyMu.Unlock()
	recs := rs.lazy
	if rec != nil {
		recs = append(recs, rec)
	}
	evs = append(rs.lazyEvents, evs...)
	rs.lazy, rs.lazyEvents = nil, nil
	if len(recs) == 0 {
		return
	}
	wctx, stop := rs.e.writeCtx(ctx)
	defer stop()
	if err := rs.e.o.Store.SaveSteps(wctx, recs, evs...); err != nil {
		rs.e.o.Logger.Error("save steps", "run_id", rs.run.ID, "steps", len(recs), "err", err)
	}
}

// flushLazy writes every deferred record now.
func (rs *runState) flushLazy(ctx context.Context) { rs.write(ctx, nil, nil) }

// host is the steps.Host a step attempt receives.
type host struct{ sr *stepRun }

func (h *host) Checkpoint(ctx context.Context, data []byte) error {
	h.sr.mu.Lock()
	h.sr.rec.Checkpoint = h.sr.rs.e.o.Redactor.Bytes(data)
	h.sr.mu.Unlock()
	h.sr.save(ctx)
	return nil
}

func (h *host) Cursor(ctx context.Context, key string) ([]byte, error) {
	b, err := h.sr.rs.e.o.Store.GetCursor(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	return b, err
}

func (h *host) SetCursor(ctx context.Context, key string, val []byte) error {
	return h.sr.rs.e.o.Store.PutCursor(context.WithoutCancel(ctx), key, h.sr.rs.e.o.Redactor.Bytes(val))
}

func (h *host) Connection(name string) (map[string]any, error) {
	rs := h.sr.rs
	override, err := rs.connectionOverride(name)
	if err != nil {
		return nil, err
	}
	if rs.e.o.Connection == nil {
		if len(override) == 0 {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connection %q is not configured", name)}
		}
		return override, nil
	}
	return rs.e.o.Connection(name, override)
}

func (h *host) Secret(name string) (string, bool) {
	v, ok := h.sr.rs.e.lookupSecret(name)
	if ok {
		h.sr.rs.e.o.Redactor.Add(v)
	}
	return v, ok
}

func (h *host) RunPlaybook(ctx context.Context, path string, inputs map[string]any) (steps.Outputs, error) {
	return h.sr.rs.runChild(ctx, h.sr.rec.ID, path, inputs)
}

// AwaitApproval returns the answer when there is one. Otherwise it records
// the request (once per process), notes the approval's deadline for the
// run's wait, and suspends the step: the run parks (ApprovalPark) or waits
// in waitApprovals and runs the step again (ApprovalWait).
func (h *host) AwaitApproval(ctx context.Context, req steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	sr := h.sr
	rs := sr.rs
	a, err := rs.e.o.Store.GetApproval(ctx, rs.run.ID, sr.rec.ID)
	if err == nil {
		return steps.ApprovalResponse{Approved: a.Approved, By: a.By, Comment: a.Comment, Fields: a.Fields, At: a.At}, nil
	}
	if !errors.Is(err, state.ErrNotFound) {
		return steps.ApprovalResponse{}, fmt.Errorf("read approval: %w", err)
	}
	if !req.Deadline.IsZero() && !rs.e.o.Clock.Now().Before(req.Deadline) {
		return steps.ApprovalResponse{}, &fault.Error{Code: fault.Timeout, Message: "approval was not answered before " + req.Deadline.UTC().Format(time.RFC3339)}
	}
	ask := askedApproval(req)
	sr.mu.Lock()
	sr.rec.Approval = ask
	sr.mu.Unlock()
	rs.mu.Lock()
	asked := rs.asked[sr.rec.ID]
	rs.asked[sr.rec.ID] = true
	if !req.Deadline.IsZero() && (rs.wakeBy.IsZero() || req.Deadline.Before(rs.wakeBy)) {
		rs.wakeBy = req.Deadline
	}
	rs.mu.Unlock()
	if !asked {
		msg := fmt.Sprintf("waiting for approval: %s (answer with: runbook runs approve %s %s)", req.Message, rs.run.ID, sr.rec.ID)
		ev := state.Event{Type: "approval.requested", Step: sr.rec.ID, Message: msg}
		if !req.Deadline.IsZero() {
			ev.Data = map[string]any{"deadline": req.Deadline.UTC().Format(time.RFC3339)}
		}
		sr.queue(ev)
	}
	return steps.ApprovalResponse{}, fault.ErrSuspended
}

// askedApproval is what the step record keeps of an approval request:
// enough to check an answer before it is recorded, no default values.
func askedApproval(req steps.ApprovalRequest) *state.ApprovalRequest {
	ask := &state.ApprovalRequest{Approvers: req.Approvers, Deadline: req.Deadline}
	if len(req.Fields) > 0 {
		ask.Fields = make(map[string]state.ApprovalField, len(req.Fields))
		for name, f := range req.Fields {
			ask.Fields[name] = state.ApprovalField{Type: f.Type, Required: f.Required && f.Default == nil}
		}
	}
	return ask
}

// eventHandler turns a step's log records into run events.
type eventHandler struct {
	sr      *stepRun
	attempt int
	attrs   []slog.Attr
	group   string
}

func (h *eventHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *eventHandler) Handle(_ context.Context, r slog.Record) error {
	data := make(map[string]any, len(h.attrs)+r.NumAttrs())
	for _, a := range h.attrs {
		addAttr(data, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(data, h.group, a)
		return true
	})
	if len(data) == 0 {
		data = nil
	}
	t := r.Time
	if t.IsZero() {
		t = h.sr.rs.e.o.Clock.Now()
	}
	h.sr.queue(state.Event{Time: t, Type: "log", Step: h.sr.rec.ID, Attempt: h.attempt,
		Level: r.Level.String(), Message: r.Message, Data: data})
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), prefixed(h.group, as)...)
	return &c
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

func prefixed(group string, as []slog.Attr) []slog.Attr {
	if group == "" {
		return as
	}
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = slog.Attr{Key: group + "." + a.Key, Value: a.Value}
	}
	return out
}

func addAttr(m map[string]any, group string, a slog.Attr) {
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			addAttr(m, key, g)
		}
		return
	}
	switch v.Kind() {
	case slog.KindDuration:
		m[key] = v.Duration().String()
	case slog.KindTime:
		m[key] = v.Time().UTC().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			m[key] = err.Error()
			return
		}
		m[key] = v.Any()
	default:
		m[key] = v.Any()
	}
}
