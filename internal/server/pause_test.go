package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// freezePlaybook's first step appends a line to first.log and waits for
// the file release beside it (what the test lets go); its second appends
// to second.log. The logs count each step's executions.
const freezePlaybook = `version: 1
name: freeze-upgrade
labels: {team: platform}
steps:
  - id: first
    uses: shell
    with: {command: "echo run >> first.log; while [ ! -f release ]; do sleep 0.02; done"}
  - id: second
    uses: shell
    with: {command: "echo run >> second.log"}
`

const otherPlaybook = `version: 1
name: other
steps:
  - {id: only, uses: set, with: {done: true}}
`

// lines counts the lines of file name in the playbook directory.
func (e *env) lines(name string) int {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, name))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(e.t, err)
	return strings.Count(string(b), "\n")
}

// waitFor polls cond until it holds, failing the test with what after 20 s.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A pause that comes while a run's step executes lets the step finish and
// starts no other: the run parks with who paused it and why, holding no
// slot (another playbook's run executes in the only one), and a new run
// of the playbook parks before its first step. Lifting the pause wakes
// both; each step runs once per run. The pause and the resume are
// audited.
func TestAPauseParksTheRunsAtTheirNextStepAndTheResumeWakesThem(t *testing.T) {
	e := newEnv(t, map[string]string{"freeze.yaml": freezePlaybook, "other.yaml": otherPlaybook}, maxRunning(1))
	run := e.startRun("freeze-upgrade", nil)
	e.waitFor("the first step to execute", func() bool { return e.lines("first.log") == 1 })

	r := e.api("POST", "/api/v1/pauses", map[string]any{"pattern": "freeze-*", "reason": "change freeze"})
	require.Equal(t, 201, r.status, "%s", r.body)
	pause := r.json(t)["pause"].(map[string]any)
	id := pause["id"].(string)
	assert.Equal(t, []any{"freeze-upgrade"}, pause["playbooks"])
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o600))

	m := e.waitStatus(run, state.RunWaiting)
	assert.Equal(t, "paused by server-token: change freeze", m["paused"])
	steps := map[string]string{}
	for _, s := range m["steps"].([]any) {
		steps[s.(map[string]any)["id"].(string)] = s.(map[string]any)["status"].(string)
	}
	assert.Equal(t, "succeeded", steps["first"], "the step executing finished")
	assert.NotContains(t, steps, "second", "no other step started")
	e.waitParked(1)
	assert.Equal(t, 0, e.lines("second.log"))

	other := e.startRun("other", nil)
	e.waitStatus(other, state.RunSucceeded) // the only slot is free: the paused run holds none

	queued := e.startRun("freeze-upgrade", nil)
	m = e.waitStatus(queued, state.RunWaiting)
	assert.Equal(t, "paused by server-token: change freeze", m["paused"])
	e.waitParked(2)
	assert.Equal(t, 1, e.lines("first.log"), "a new run of a paused playbook starts no step")

	r = e.api("POST", "/api/v1/runs/"+run+"/resume", map[string]any{})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, r.json(t)["error"], "is paused by server-token: change freeze: it goes on when the pause is lifted")

	pb := e.api("GET", "/api/v1/playbooks/freeze-upgrade", nil).json(t)
	require.NotNil(t, pb["paused"], "the playbook shows its pause")
	assert.Equal(t, id, pb["paused"].(map[string]any)["id"])
	list := e.api("GET", "/api/v1/pauses", nil).json(t)["pauses"].([]any)
	require.Len(t, list, 1)

	r = e.api("POST", "/api/v1/pauses", map[string]any{"pattern": "freeze-*", "reason": "again"})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, r.json(t)["error"], "pause "+id)

	r = e.api("DELETE", "/api/v1/pauses/"+id, nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	for _, id := range []string{run, queued} {
		m := e.waitStatus(id, state.RunSucceeded)
		assert.Nil(t, m["paused"])
	}
	assert.Equal(t, 2, e.lines("first.log"), "once per run: no step repeated")
	assert.Equal(t, 2, e.lines("second.log"))
	assert.Nil(t, e.api("GET", "/api/v1/playbooks/freeze-upgrade", nil).json(t)["paused"])

	var actions []string
	for _, a := range e.api("GET", "/api/v1/audit", nil).json(t)["records"].([]any) {
		rec := a.(map[string]any)
		if action := rec["action"].(string); strings.HasPrefix(action, "runs.") {
			target, _ := rec["target"].(string)
			detail, _ := rec["detail"].(map[string]any)
			actions = append(actions, fmt.Sprint(action, " ", target, " ", rec["result"], " ", detail["selector"], " ", detail["reason"]))
		}
	}
	assert.Contains(t, actions, "runs.pause pause:"+id+" ok freeze-* change freeze")
	assert.Contains(t, actions, "runs.unpause pause:"+id+" ok freeze-* change freeze")
}

// The pause routes refuse what they cannot do, with the reason.
func TestPauseRoutesRefuseWhatTheyCannotDo(t *testing.T) {
	e := newEnv(t, map[string]string{"other.yaml": otherPlaybook})
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		says   string
	}{
		{"a pause needs a reason", map[string]any{"pattern": "x"}, 400, `a pause needs a "reason"`},
		{"a pause needs a selector", map[string]any{"reason": "x"}, 400, "by a name pattern or by a label"},
		{"not both", map[string]any{"pattern": "x", "label": "a=b", "reason": "x"}, 400, "one of them"},
		{"a bad pattern", map[string]any{"pattern": "[x", "reason": "x"}, 400, "syntax error in pattern"},
		{"a label is k=v", map[string]any{"label": "team", "reason": "x"}, 400, "want k=v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.api("POST", "/api/v1/pauses", tc.body)
			assert.Equal(t, tc.status, r.status, "%s", r.body)
			assert.Contains(t, r.json(t)["error"], tc.says)
		})
	}
	r := e.api("DELETE", "/api/v1/pauses/pnope", nil)
	assert.Equal(t, 404, r.status)
	assert.Contains(t, r.json(t)["error"], "no pause pnope")
}

// gatedFreeze waits for an approval, then appends to after.log; it holds
// the concurrency key shared while it runs, as keyNeighbour does.
const gatedFreeze = `version: 1
name: gated-freeze
concurrency: {key: shared, on_busy: queue}
steps:
  - {id: ok, uses: approval, with: {message: "go on?"}}
  - {id: after, uses: shell, with: {command: "echo run >> after.log"}}
`

const keyNeighbour = `version: 1
name: neighbour
concurrency: {key: shared, on_busy: queue}
steps:
  - {id: only, uses: set, with: {done: true}}
`

// An approval waiting when its playbook is paused stays answerable: the
// answer is recorded and ends the approval step, but the step after it
// does not start until the resume. The paused run keeps its concurrency
// key: a run of another playbook on that key waits for it.
func TestAnAnswerToAPausedRunsApprovalDoesNotBypassThePause(t *testing.T) {
	e := newEnv(t, map[string]string{"gated.yaml": gatedFreeze, "neighbour.yaml": keyNeighbour})
	run := e.startRun("gated-freeze", nil)
	e.waitStatus(run, state.RunWaiting)
	r := e.api("POST", "/api/v1/pauses", map[string]any{"pattern": "gated-*", "reason": "change freeze"})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["pause"].(map[string]any)["id"].(string)

	r = e.api("POST", "/api/v1/runs/"+run+"/approve", map[string]any{"approve": true, "by": "alice"})
	require.Equal(t, 200, r.status, "the approval stays answerable: %s", r.body)
	var m map[string]any
	e.waitFor("the run parks paused after the answer", func() bool {
		m = e.api("GET", "/api/v1/runs/"+run, nil).json(t)
		return m["status"] == "waiting" && m["paused"] == "paused by server-token: change freeze"
	})
	steps := map[string]string{}
	for _, s := range m["steps"].([]any) {
		steps[s.(map[string]any)["id"].(string)] = s.(map[string]any)["status"].(string)
	}
	assert.Equal(t, "succeeded", steps["ok"], "the answer ended the approval step")
	assert.NotContains(t, steps, "after", "the step after it did not start")
	assert.Equal(t, 0, e.lines("after.log"))

	neighbour := e.startRun("neighbour", nil)
	n := e.waitStatus(neighbour, state.RunWaiting)
	assert.Equal(t, "shared", n["queued_on_key"], "the paused run keeps its key")

	require.Equal(t, 200, e.api("DELETE", "/api/v1/pauses/"+id, nil).status)
	e.waitStatus(run, state.RunSucceeded)
	e.waitStatus(neighbour, state.RunSucceeded)
	assert.Equal(t, 1, e.lines("after.log"))
}
