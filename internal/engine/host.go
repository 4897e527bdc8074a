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
// run's wait, and suspends the step: the run parks (ApprovalPark) or waits
// in runMain and runs the step again (ApprovalWait).
func (h *host) AwaitApproval(ctx context.Context, req steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	sr := h.sr
	rs := sr.rs
	a, err := rs.e.o.Store.GetApproval(ctx, rs.run.ID, sr.rec.ID)
	if err == nil && !a.Pending {
		rs.markGoingOn(ctx, sr.rec.ID, "was answered")
		return answered(a), nil
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return steps.ApprovalResponse{}, fmt.Errorf("read approval: %w", err)
	}
	if !req.Deadline.IsZero() && !rs.e.o.Clock.Now().Before(req.Deadline) {
		msg := "approval was not answered before " + req.Deadline.UTC().Format(time.RFC3339)
		sr.queue(state.Event{Type: "approval.timed_out", Step: sr.rec.ID, Message: msg})
		rs.markGoingOn(ctx, sr.rec.ID, "timed out")
		return steps.ApprovalResponse{}, &fault.Error{Code: fault.Timeout, Message: msg}
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
	ask := &state.ApprovalRequest{Approvers: req.Approvers, Deadline: req.Deadline, Required: req.Required, AllowSelfApproval: req.AllowSelfApproval}
	if len(req.Fields) > 0 {
		ask.Fields = make(map[string]state.ApprovalField, len(req.Fields))
		for name, f := range req.Fields {
			ask.Fields[name] = state.ApprovalField{Type: f.Type, Required: f.Required && f.Default == nil}
		}
	}
	return ask
}
