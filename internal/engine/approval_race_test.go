package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// answerAtDeadline is the store of a run whose approval step, past its
// deadline, has just read that no answer decided it: at that moment, once,
// it answers the approval with a rejection, as an approver on another
// replica would at the same instant.
type answerAtDeadline struct {
	state.Store
	clock    interface{ Now() time.Time }
	deadline time.Time
	answer   func() error // set once the run is known (deadline too)
	once     sync.Once
	err      error // the rejection's answer
}

func (s *answerAtDeadline) GetApproval(ctx context.Context, runID, step string) (*state.Approval, error) {
	a, err := s.Store.GetApproval(ctx, runID, step)
	if errors.Is(err, state.ErrNotFound) && !s.deadline.IsZero() && !s.clock.Now().Before(s.deadline) {
		s.once.Do(func() { s.err = s.answer() })
	}
	return a, err
}

// A rejection given as the deadline of an approval with on_timeout:
// approve passes, after the step read that nothing answered it but before
// it went on, either decides the step (the run fails, rejected) or is
// refused with a conflict: it is never accepted and then overridden by
// the timeout's approval.
func TestARejectionAtTheDeadlineIsNotOverriddenByTheTimeout(t *testing.T) {
	ctx := context.Background()
	var st *answerAtDeadline
	h := newHarness(t, func(o *engine.Options) {
		st = &answerAtDeadline{Store: o.Store, clock: o.Clock}
		o.Store = st
	})
	r, err := h.run(`
version: 1
name: gate
steps:
  - id: gate
    uses: approval
    with: {message: "go?", timeout: 1h, on_timeout: approve}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}"}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	st.deadline = h.steps(r.ID)["gate"].Approval.Deadline
	st.answer = func() error {
		return h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: false, By: "alice", Comment: "no"})
	}

	require.NoError(t, h.clock.Sleep(ctx, time.Hour))
	r, _ = h.engine.Resume(ctx, r.ID)
	switch {
	case st.err == nil:
		assert.Equal(t, state.RunFailed, r.Status, "the rejection was accepted (200): the run must end rejected")
		a, err := h.store.GetApproval(ctx, r.ID, "gate")
		require.NoError(t, err)
		assert.False(t, a.Approved)
		assert.False(t, a.TimedOut)
		if after := h.steps(r.ID)["after"]; after != nil {
			assert.Equal(t, state.StepSkipped, after.Status, "nothing ran after a rejected approval")
		}
	case fault.CodeOf(st.err) == fault.Conflict:
		assert.Equal(t, state.RunSucceeded, r.Status, "the timeout decided first; the rejection was refused (409): %v", st.err)
	default:
		t.Fatalf("the rejection at the deadline: %v", st.err)
	}
}
