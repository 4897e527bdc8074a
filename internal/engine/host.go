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

func (h *host) Mask(s string) string { return h.sr.rs.e.o.Redactor.String(s) }

func (h *host) Secret(name string) (string, bool) {
	v, ok := h.sr.rs.e.lookupSecret(name)
	if ok {
		h.sr.rs.e.o.Redactor.Add(v)
	}
	return v, ok
}

func (h *host) RunPlaybook(ctx context.Context, path string, inputs map[string]any) (steps.Outputs, error) {
	h.sr.child = true
	return h.sr.rs.runChild(ctx, h.sr.rec.ID, path, inputs)
}

// AwaitApproval returns the answer when there is one. Otherwise it records
// the request (once per process), notes the approval's deadline for the
// run's wake, and suspends the step: the run parks.
func (h *host) AwaitApproval(ctx context.Context, req steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	sr := h.sr
	rs := sr.rs
	var a *state.Approval
	err := rs.stored(func() (err error) {
		a, err = rs.e.o.Store.GetApproval(ctx, rs.run.ID, sr.rec.ID)
		return err
	})
	if err == nil && !a.Pending {
		return sr.decided(ctx, a, req.Deadline)
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return steps.ApprovalResponse{}, fmt.Errorf("read approval: %w", err)
	}
	if !req.Deadline.IsZero() && !rs.e.o.Clock.Now().Before(req.Deadline) {
		return sr.timeOut(ctx, req.Deadline)
	}
	ask := askedApproval(req)
	sr.mu.Lock()
	sr.rec.Approval = ask
	sr.mu.Unlock()
	rs.mu.Lock()
	asked := rs.asked[sr.rec.ID]
	rs.asked[sr.rec.ID] = true
	rs.wakeByLocked(req.Deadline)
	rs.mu.Unlock()
	if !asked {
		msg := fmt.Sprintf("waiting for approval: %s (answer with: runbook runs approve %s %s%s)", req.Message, rs.run.ID, sr.rec.ID, ask.FieldArgs())
		ev := state.Event{Type: "approval.requested", Step: sr.rec.ID, Message: msg}
		if !req.Deadline.IsZero() {
			ev.Data = map[string]any{"deadline": req.Deadline.UTC().Format(time.RFC3339)}
		}
		sr.queue(ev)
	}
	return steps.ApprovalResponse{}, fault.ErrSuspended
}

// decided returns the step's view of its decided approval a: the answer,
// or the timeout error when its deadline decided it.
func (sr *stepRun) decided(ctx context.Context, a *state.Approval, deadline time.Time) (steps.ApprovalResponse, error) {
	if a.TimedOut {
		return steps.ApprovalResponse{}, &fault.Error{Code: fault.Timeout, Message: notAnsweredBefore(deadline)}
	}
	return answered(a), nil
}

// timeOut decides the approval at its deadline as an answer would, a
// compare-and-set (state.Store.AnswerApproval): when no answer decided it
// first, the approval is recorded timed out with "approval.timed_out",
// and an answer given after is refused; when one did, the step has that
// answer. So an answer that was accepted is never overridden by the
// timeout (on_timeout: approve cannot win over an accepted rejection).
func (sr *stepRun) timeOut(ctx context.Context, deadline time.Time) (steps.ApprovalResponse, error) {
	rs := sr.rs
	msg := notAnsweredBefore(deadline)
	var won *state.Approval // the answer that decided it first
	var ev state.Event
	// An unavailable store is tried again (stored): made twice, the second
	// finds the first's timeout decided, and the step has it.
	err := rs.stored(func() error {
		wctx, stop := rs.writeCtx(ctx)
		defer stop()
		return rs.e.o.Store.AnswerApproval(wctx, rs.run.ID, sr.rec.ID, func(_ *state.StepRecord, prev *state.Approval) (*state.Approval, []state.Event, error) {
			won = nil
			if prev != nil && !prev.Pending {
				won = prev
				return nil, nil, nil
			}
			out := &state.Approval{RunID: rs.run.ID, Step: sr.rec.ID, TimedOut: true, At: rs.e.o.Clock.Now()}
			if prev != nil {
				out.Answers = prev.Answers
			}
			ev = sr.prepare(state.Event{Type: "approval.timed_out", Step: sr.rec.ID, Message: msg})
			return out, []state.Event{ev}, nil
		})
	})
	if err != nil {
		return steps.ApprovalResponse{}, fmt.Errorf("record the approval's timeout: %w", rs.refused(err))
	}
	if won != nil {
		return sr.decided(ctx, won, deadline)
	}
	rs.e.observe(rs.run.ID, ev)
	return sr.decided(ctx, &state.Approval{TimedOut: true}, deadline)
}

func notAnsweredBefore(deadline time.Time) string {
	return "approval was not answered before " + deadline.UTC().Format(time.RFC3339)
}

// askedApproval is what the step record keeps of an approval request:
// enough to check an answer before it is recorded, no default values.
func askedApproval(req steps.ApprovalRequest) *state.ApprovalRequest {
	ask := &state.ApprovalRequest{Approvers: req.Approvers, Deadline: req.Deadline, Required: req.Required, AllowSelfApproval: req.AllowSelfApproval}
	if len(req.Fields) > 0 {
		ask.Fields = make(map[string]state.ApprovalField, len(req.Fields))
		for name, f := range req.Fields {
			ask.Fields[name] = state.ApprovalField{Type: f.Type, Required: f.Required && f.Default == nil}
		}
	}
	return ask
}
