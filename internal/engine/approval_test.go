package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

const ticketGate = `
version: 1
name: gate
steps:
  - id: gate
    uses: approval
    with:
      message: "upgrade prod?"
      approvers: [alice, bob]
      fields:
        ticket: {type: string, required: true}
        replicas: {type: integer, default: 3}
  - id: after
    uses: set
    with: {ticket: "${{ steps.gate.outputs.fields.ticket }}"}
`

// An answer the approval step would fail on is refused before it is
// recorded: every problem is listed, and the run keeps waiting for a
// correct answer.
func TestAnAnswerThatDoesNotFitTheFieldsIsRefusedAndTheRunKeepsWaiting(t *testing.T) {
	cases := []struct {
		name     string
		answer   state.Approval
		wantCode fault.Code
		problems []string
	}{
		{name: "a required field left out", answer: state.Approval{Approved: true, By: "alice"},
			wantCode: fault.Invalid, problems: []string{"field ticket is required"}},
		{name: "a misspelt field names the one it meant", answer: state.Approval{Approved: true, By: "alice", Fields: map[string]any{"tiket": "OPS-1"}},
			wantCode: fault.Invalid, problems: []string{"field ticket is required", `unknown field "tiket"; did you mean "ticket"?`}},
		{name: "every wrong type is listed", answer: state.Approval{Approved: true, By: "alice", Fields: map[string]any{"ticket": 7.0, "replicas": "three"}},
			wantCode: fault.Invalid, problems: []string{`field replicas must be an integer (got string "three")`, "field ticket must be a string (got number 7)"}},
		{name: "an answer by someone not listed", answer: state.Approval{Approved: true, By: "mallory", Fields: map[string]any{"ticket": "OPS-1"}},
			wantCode: fault.Unauthorized},
		{name: "an answer by nobody", answer: state.Approval{Approved: true, Fields: map[string]any{"ticket": "OPS-1"}},
			wantCode: fault.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			r, err := h.run(ticketGate, nil)
			require.NoError(t, err)
			require.Equal(t, state.RunWaiting, r.Status)

			err = h.engine.Approve(ctx, r.ID, "gate", tc.answer)
			require.Error(t, err)
			assert.Equal(t, tc.wantCode, fault.CodeOf(err))
			if tc.problems != nil {
				var se *fault.Error
				require.True(t, errors.As(err, &se))
				assert.Equal(t, tc.problems, se.Data["problems"])
				for _, p := range tc.problems {
					assert.Contains(t, err.Error(), p)
				}
			}
			_, answerErr := h.store.GetApproval(ctx, r.ID, "gate")
			assert.ErrorIs(t, answerErr, state.ErrNotFound, "nothing is recorded")

			r, err = h.engine.Resume(ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, state.RunWaiting, r.Status, "the run keeps waiting")

			require.NoError(t, h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: true, By: "bob", Fields: map[string]any{"ticket": "OPS-1"}}))
			r, err = h.engine.Resume(ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, state.RunSucceeded, r.Status)
			assert.Equal(t, "OPS-1", h.steps(r.ID)["after"].Outputs["ticket"])
			assert.Equal(t, "bob", h.steps(r.ID)["gate"].Outputs["by"])
		})
	}
}

// A rejection is the one answer that fails the gate, and continue_on_error
// or if can handle it like any failed step.
func TestARejectionFailsTheGateAndCanBeHandled(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: gate
steps:
  - id: gate
    uses: approval
    continue_on_error: true
    with: {message: "go?", fields: {ticket: {type: string, required: true}}}
  - id: rejected
    if: ${{ steps.gate.status == 'failed' }}
    uses: set
    with: {why: "${{ steps.gate.error.message }}"}
`, nil)
	require.NoError(t, err)
	// A rejection needs none of the approval's fields.
	require.NoError(t, h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: false, By: "bob", Comment: "not today"}))
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, state.StepFailed, h.steps(r.ID)["gate"].Status)
	assert.Equal(t, "rejected by bob: not today", h.steps(r.ID)["rejected"].Outputs["why"])
}

// An approval's timeout counts from when it first waited, across resumes,
// on the engine's clock; on_timeout says what it answers.
func TestAnApprovalTimeoutKeepsItsDeadlineAcrossResumes(t *testing.T) {
	for _, onTimeout := range []string{"approve", "reject"} {
		t.Run("on_timeout "+onTimeout, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			r, err := h.run(`
version: 1
name: gate
steps:
  - id: gate
    uses: approval
    with: {message: "go?", timeout: 1h, on_timeout: `+onTimeout+`, fields: {note: {type: string, default: none}}}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}", note: "${{ steps.gate.outputs.fields.note }}"}}
`, nil)
			require.NoError(t, err)
			require.Equal(t, state.RunWaiting, r.Status)
			require.NotNil(t, h.steps(r.ID)["gate"].Approval)
			deadline := h.steps(r.ID)["gate"].Approval.Deadline
			assert.Equal(t, h.clock.Now().Add(time.Hour), deadline)

			require.NoError(t, h.clock.Sleep(ctx, 40*time.Minute))
			r, err = h.engine.Resume(ctx, r.ID)
			require.NoError(t, err)
			require.Equal(t, state.RunWaiting, r.Status, "before the deadline the run still waits")
			assert.Equal(t, deadline, h.steps(r.ID)["gate"].Approval.Deadline, "a resumed run keeps the first deadline")

			require.NoError(t, h.clock.Sleep(ctx, 20*time.Minute))
			r, err = h.engine.Resume(ctx, r.ID)
			if onTimeout == "reject" {
				require.Error(t, err)
				assert.Equal(t, state.RunFailed, r.Status)
				assert.Equal(t, string(fault.Timeout), h.steps(r.ID)["gate"].Error.Code)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, state.RunSucceeded, r.Status)
			assert.Equal(t, map[string]any{"by": "timeout", "note": "none"}, h.steps(r.ID)["after"].Outputs)
			assert.Equal(t, true, h.steps(r.ID)["gate"].Outputs["timed_out"])
		})
	}
}
