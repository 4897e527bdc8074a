package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// A secret input is masked in the run record from its first write.
func TestSecretInputsAreMaskedInTheRunRecord(t *testing.T) {
	h := newHarness(t)
	pb := h.load(`
version: 1
name: secret-input
inputs:
  pw: {type: string, secret: true}
steps:
  - {id: a, uses: log, with: {message: "pw ${{ inputs.pw }}"}}
`)
	r, err := h.engine.Start(context.Background(), pb, engine.StartRequest{Inputs: map[string]any{"pw": "zebra-unique-77"}})
	require.NoError(t, err)
	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	b, _ := json.Marshal(got)
	assert.NotContains(t, string(b), "zebra-unique-77")
	assert.Equal(t, "***", got.Inputs["pw"])
}

// A run executed from its record lacks its secret inputs (the record
// holds the mask): it is cancelled with the way to resume it rather than
// run with "***" for a value, and resumes with the value given again.
func TestAResumedRunNeedsItsSecretInputsGivenAgain(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: secret-resume
inputs:
  pw: {type: string, secret: true}
  region: {type: string, default: kr1}
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
  - {id: check, uses: fail, if: '${{ inputs.pw != "zebra-unique-77" }}', with: {message: "the step saw the wrong password"}}
`, map[string]any{"pw": "zebra-unique-77"})
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	require.NoError(t, h.engine.Approve(context.Background(), r.ID, "gate", state.Approval{Approved: true, By: "alice"}))

	r, err = h.engine.Resume(context.Background(), r.ID)
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "runbook run --resume "+r.ID+" -i pw=VALUE")
	assert.Equal(t, state.RunCancelled, r.Status)
	_, ran := h.steps(r.ID)["check"]
	assert.False(t, ran, "no step ran with the mask for a value")

	_, err = h.engine.ResumeInputs(context.Background(), r.ID, map[string]any{"region": "kr2"})
	require.Error(t, err, "only secret inputs can be given again")
	assert.Contains(t, err.Error(), "inputs.region: only secret inputs can be given again")

	r, err = h.engine.ResumeInputs(context.Background(), r.ID, map[string]any{"pw": "zebra-unique-77"})
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, "***", got.Inputs["pw"], "still masked in the record")
}
