package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A run recorded running that nothing executes (its process died and
// this server cannot resume it) is interrupted in the API, with the
// command that continues it, and never listed running.
func TestARunNothingExecutesIsInterruptedInTheAPI(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.db")
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	dead := &state.Run{ID: "dead-run", Playbook: "gone", Snapshot: []byte("not: [a playbook"), Hash: "x",
		Status: state.RunRunning, Owner: "elsewhere/4242", StartedAt: time.Now(), Trigger: map[string]any{"type": "api"}}
	require.NoError(t, store.CreateRun(context.Background(), dead))
	require.NoError(t, store.Close())

	e := start(t, t.TempDir(), statePath, map[string]string{"nap.yaml": `version: 1
name: nap
steps:
  - {id: nap, uses: sleep, with: {duration: 1500ms}}
`})
	m := e.api("GET", "/api/v1/runs/dead-run", nil).json(t)
	assert.Equal(t, "interrupted", m["status"])
	assert.Equal(t, "runbook run --resume dead-run", m["hint"])
	assert.Equal(t, false, m["executing"])

	for _, list := range []string{"/api/v1/runs", "/api/v1/runs/page"} {
		running := e.api("GET", list+"?status=running", nil).json(t)["runs"].([]any)
		assert.Empty(t, running, list)
		interrupted := e.api("GET", list+"?status=interrupted&trigger=api", nil).json(t)["runs"].([]any)
		require.Len(t, interrupted, 1, list)
		assert.Equal(t, "dead-run", interrupted[0].(map[string]any)["id"])
	}

	// A run this server executes is running, not interrupted.
	id := e.api("POST", "/api/v1/playbooks/nap/runs", nil).json(t)["id"].(string)
	m = e.waitStatus(id, state.RunRunning, state.RunInterrupted)
	assert.Equal(t, "running", m["status"])
	assert.Nil(t, m["hint"])
}
