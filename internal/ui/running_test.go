package ui_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
)

// A step recorded running in a run whose process is gone (the run is
// shown interrupted) is shown interrupted, saying it was running when the
// process stopped, with what it printed: not running, with time going by.
func TestAStepOfAnInterruptedRunIsNotShownRunning(t *testing.T) {
	var store state.Store
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook}, func(o *server.Options) { store = o.Engine.Store })
	e.signedIn()
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	r := &state.Run{ID: "20261129T010000-0d0d0d", Playbook: "demo", Hash: "h", Snapshot: []byte(demoPlaybook),
		Status: state.RunRunning, Owner: "gone-host/1", CreatedAt: start, StartedAt: start}
	require.NoError(t, store.CreateRun(ctx, r))
	require.NoError(t, store.SaveSteps(ctx, []*state.StepRecord{
		{RunID: r.ID, ID: "hello", Status: state.StepRunning, Attempts: 1, StartedAt: start},
	}, state.Event{Time: start, Type: "step.started", Step: "hello", Attempt: 1}))
	require.NoError(t, store.(state.StepOutput).AppendOutput(ctx, r.ID, []state.OutputLine{
		{Time: start, Step: "hello", Attempt: 1, Stream: state.StreamStdout, Text: "draining node-7"}}))

	p := e.get("/runs/" + r.ID)
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, `st st-interrupted`)
	assert.Contains(t, p.body, "was running (attempt 1) when the process that ran it stopped; it runs again when the run resumes · started")
	assert.Contains(t, p.body, "draining node-7")
	assert.NotContains(t, p.body, "data-since", "no time goes by")
	assert.NotContains(t, p.body, "lines so far")
	assert.NotContains(t, p.body, "st-running")
}
