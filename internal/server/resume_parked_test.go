package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
)

// A resume of a run parked on a long sleep ends the sleep now: the run
// goes on at once, the sleep succeeding as the same attempt.
func TestResumingAParkedSleepWakesItNow(t *testing.T) {
	e := newEnv(t, map[string]string{"nap.yaml": napPlaybook})
	id := e.startRun("nap", nil)
	e.waitParked(1)
	r := e.api("POST", "/api/v1/runs/"+id+"/resume", map[string]any{})
	require.Equal(t, 202, r.status, "%s", r.body)
	m := e.waitStatus(id, state.RunSucceeded)
	steps := stepsByID(m)
	assert.Equal(t, "succeeded", steps["nap"]["status"])
	assert.EqualValues(t, 1, steps["nap"]["attempts"], "the same attempt")
	assert.Equal(t, "succeeded", steps["after"]["status"])
	e.waitParked(0)
}

// A resume of a run parked between two attempts starts the next attempt
// now; the run parks again on the delay after it.
func TestResumingARunParkedOnARetryDelayStartsTheNextAttempt(t *testing.T) {
	e := newEnv(t, map[string]string{"flaky.yaml": `version: 1
name: flaky
steps:
  - {id: boom, uses: fail, with: {message: no, code: unavailable}, retry: {attempts: 5, delay: 1h}}
`})
	id := e.startRun("flaky", nil)
	e.waitParked(1)
	assert.EqualValues(t, 1, stepsByID(e.api("GET", "/api/v1/runs/"+id, nil).json(t))["boom"]["attempts"])
	require.Equal(t, 202, e.api("POST", "/api/v1/runs/"+id+"/resume", map[string]any{}).status)
	deadline := time.Now().Add(10 * time.Second)
	for stepsByID(e.api("GET", "/api/v1/runs/"+id, nil).json(t))["boom"]["attempts"] != float64(2) {
		require.True(t, time.Now().Before(deadline), "no second attempt within 10 s")
		time.Sleep(10 * time.Millisecond)
	}
	e.waitParked(1)
	assert.Equal(t, "waiting", e.api("GET", "/api/v1/runs/"+id, nil).json(t)["status"])
}

// A resume of a run parked on what a resume cannot end is refused, saying
// what the run waits for: an unanswered approval, a key held by another
// run.
func TestResumingARunWaitingForAnApprovalOrAKeySaysWhatItWaitsFor(t *testing.T) {
	pbs := map[string]string{"gate.yaml": approvalPlaybook}
	for name, src := range keyedPlaybooks {
		pbs[name] = src
	}
	e := newEnv(t, pbs)
	gate := e.startRun("gate", nil)
	holder := e.startRun("sleeper", nil)
	e.waitParked(2)
	queued := e.startRun("queued", nil)
	e.waitParked(3)

	r := e.api("POST", "/api/v1/runs/"+gate+"/resume", map[string]any{})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "waiting for an answer to approval step ok")
	r = e.api("POST", "/api/v1/runs/"+queued+"/resume", map[string]any{})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `queued on concurrency key \"k\", held by run `+holder)
	assert.Equal(t, float64(3), e.metric("runbook_runs_parked"), "all still parked")
}

// A resume answered is not lost when the server stops before the woken
// run had a slot: the resume is on record before the answer, and the
// next server ends the sleep at once (the same attempt), not at its first
// deadline an hour later.
func TestAResumeAnsweredOutlivesAStopBeforeTheRunHadASlot(t *testing.T) {
	dir, statePath := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	gate := filepath.Join(dir, "gate")
	pbs := map[string]string{"nap.yaml": napPlaybook, "hold.yaml": `version: 1
name: hold
steps:
  - {id: wait, uses: shell, with: {command: "while [ ! -e ` + gate + ` ]; do sleep 0.02; done"}}
`}
	quickStop := func(o *server.Options) { o.ShutdownGrace = 200 * time.Millisecond }
	e := start(t, dir, statePath, pbs, maxRunning(1), quickStop)
	nap := e.startRun("nap", nil)
	e.waitParked(1)
	hold := e.startRun("hold", nil)
	e.waitStep(hold, "wait", state.StepRunning) // the only slot

	r := e.api("POST", "/api/v1/runs/"+nap+"/resume", map[string]any{})
	require.Equal(t, 202, r.status, "%s", r.body)
	m := e.api("GET", "/api/v1/runs/"+nap, nil).json(t)
	assert.Equal(t, "waiting", m["status"], "no slot yet")
	e.stop()

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	e = start(t, dir, statePath, pbs)
	m = e.waitStatus(nap, state.RunSucceeded)
	steps := stepsByID(m)
	assert.Equal(t, "succeeded", steps["nap"]["status"], "the sleep ended at the resume")
	assert.EqualValues(t, 1, steps["nap"]["attempts"], "the same attempt")
	assert.Equal(t, "succeeded", steps["after"]["status"])
	e.waitStatus(hold, state.RunSucceeded)
}
