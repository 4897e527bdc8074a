package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
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
