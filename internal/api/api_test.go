package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestARunIsItsRecordWithoutSnapshotOrCheckpoints: the API shows the
// stored run and step records, never the playbook source nor the engine's
// resume data, and a client decodes them back into the records.
func TestARunIsItsRecordWithoutSnapshotOrCheckpoints(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	run := api.Run{
		Run: &state.Run{
			ID: "20261122T090000-1a2b3c", Playbook: "gate", File: "gate.yaml", Snapshot: []byte("version: 1"), Hash: "5c1e",
			Inputs: map[string]any{"who": "ops"}, Trigger: map[string]any{"type": "api"}, Status: state.RunRunning,
			Owner: "host/42", CreatedAt: at, StartedAt: at,
		},
		Executing: true,
		Steps: []api.RunStep{{StepRecord: &state.StepRecord{
			RunID: "20261122T090000-1a2b3c", ID: "ok", Status: state.StepWaiting, Attempts: 1,
			Checkpoint: []byte(`{"poll":3}`), StartedAt: at,
		}}},
		WaitingFor: &api.WaitingFor{Step: "ok"},
	}
	const want = `{"id":"20261122T090000-1a2b3c","playbook":"gate","file":"gate.yaml","hash":"5c1e",` +
		`"inputs":{"who":"ops"},"trigger":{"type":"api"},"status":"running","owner":"host/42",` +
		`"created_at":"2026-11-22T09:00:00Z","started_at":"2026-11-22T09:00:00Z","executing":true,` +
		`"steps":[{"run_id":"20261122T090000-1a2b3c","id":"ok","status":"waiting","attempts":1,"started_at":"2026-11-22T09:00:00Z"}],` +
		`"waiting_for":{"step":"ok"}}`
	assert.Equal(t, want, encode(t, run))

	var back api.Run
	require.NoError(t, json.Unmarshal([]byte(want), &back))
	require.NotNil(t, back.Run)
	assert.Equal(t, state.RunRunning, back.Status)
	assert.Equal(t, at, back.StartedAt.UTC())
	require.Len(t, back.Steps, 1)
	assert.Equal(t, state.StepWaiting, back.Steps[0].Status)
	assert.Equal(t, "ok", back.WaitingFor.Step)
}

// TestAnswersKeepTheirBytes: the small answers are encoded as the API has
// always sent them, keys in the same order.
func TestAnswersKeepTheirBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"an error", api.ErrorBody{Error: "no run \"x\"", Code: "not_found"}, `{"error":"no run \"x\"","code":"not_found"}`},
		{"an error with problems", api.ErrorBody{Error: "refused", Code: "invalid", Problems: []string{"field ticket is required"}},
			`{"error":"refused","code":"invalid","problems":["field ticket is required"]}`},
		{"an approval", api.ApproveAnswer{ID: "r", Step: "ok", Approved: true}, `{"approved":true,"id":"r","step":"ok"}`},
		{"a cancel", api.CancelAnswer{ID: "r", Status: "cancelling"}, `{"id":"r","status":"cancelling"}`},
		{"a resume", api.ResumeAnswer{ID: "r", Status: "resuming"}, `{"id":"r","status":"resuming"}`},
		{"a reload", api.ReloadAnswer{Status: "ok", Playbooks: 4}, `{"playbooks":4,"status":"ok"}`},
		{"the health", api.Health{Status: "ok", Playbooks: 4, RunsExecuting: 2, LoadedAt: "2026-11-22T07:25:00Z"},
			`{"loaded_at":"2026-11-22T07:25:00Z","playbooks":4,"runs_executing":2,"status":"ok"}`},
		{"the health after a refused reload", api.Health{Status: "ok", Playbooks: 4, LoadedAt: "2026-11-22T07:25:00Z", ReloadProblems: 1},
			`{"loaded_at":"2026-11-22T07:25:00Z","playbooks":4,"reload_problems":1,"runs_executing":0,"status":"ok"}`},
		{"an event page", api.EventPage{Events: []state.Event{}, Status: state.RunSucceeded}, `{"events":[],"status":"succeeded"}`},
		{"the end of a stream", api.StreamEnd{Status: state.RunFailed}, `{"status":"failed"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, encode(t, tc.v))
		})
	}
}
