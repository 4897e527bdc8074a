package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

const napPlaybook = `version: 1
name: nap
inputs:
  for: {type: string, default: 1h}
steps:
  - {id: nap, uses: sleep, with: {duration: "${{ inputs.for }}"}}
  - {id: after, uses: set, with: {done: true}}
finally:
  - {id: bye, uses: set, with: {status: "${{ run.status }}"}}
`

// sample reads one series from /metrics, named with its labels if it has
// any (`runbook_runs{status="waiting"}`); ok is false when it is not
// exported.
func (e *env) sample(series string) (v float64, ok bool) {
	e.t.Helper()
	r := e.do("GET", "/metrics", "", nil)
	require.Equal(e.t, 200, r.status)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(r.body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(e.t, err)
	return v, true
}

// metric reads one series from /metrics (see sample), which must be
// exported.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	v, ok := e.sample(series)
	require.True(e.t, ok, "no %s in /metrics", series)
	return v
}

// waitParked polls runbook_runs_parked until it is n.
func (e *env) waitParked(n int) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.metric("runbook_runs_parked") != float64(n) {
		if time.Now().After(deadline) {
			e.t.Fatalf("runbook_runs_parked is %v, want %d", e.metric("runbook_runs_parked"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) startRun(playbook string, inputs map[string]any) string {
	e.t.Helper()
	r := e.api("POST", "/api/v1/playbooks/"+playbook+"/runs", map[string]any{"inputs": inputs})
	require.Equal(e.t, 201, r.status, "%s", r.body)
	return r.json(e.t)["id"].(string)
}

// Runs waiting on an approval or a long sleep hold no goroutine under
// serve: the goroutine count stays flat however many wait, and each goes
// on when answered.
func TestWaitingRunsHoldNoGoroutine(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "nap.yaml": napPlaybook})
	const n = 150
	runtime.GC()
	before := runtime.NumGoroutine()
	var gates []string
	for range n {
		gates = append(gates, e.startRun("gate", nil))
		e.startRun("nap", nil)
	}
	e.waitParked(2 * n)
	assert.Equal(t, 2*n, int(e.metric("runbook_runs_executing")), "parked runs are the server's (schedules' overlap, the watchdog)")
	time.Sleep(50 * time.Millisecond) // let the runs' goroutines end
	grown := runtime.NumGoroutine() - before
	assert.Less(t, grown, 20, "%d runs wait, the goroutines grew by %d", 2*n, grown)

	for _, id := range gates {
		r := e.api("POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "by": "alice"})
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	for _, id := range gates {
		e.waitStatus(id, state.RunSucceeded)
	}
	e.waitParked(n)
}

// A run parked on a sleep survives a restart: the next server parks it
// again until the sleep's first deadline (it is not restarted, and not
// executed at start), then finishes it as the same attempt. A parked
// approval is answered after the restart.
func TestAParkedSleepEndsAtItsFirstDeadlineAfterARestart(t *testing.T) {
	dir, statePath := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	pbs := map[string]string{"gate.yaml": approvalPlaybook, "nap.yaml": napPlaybook}
	e := start(t, dir, statePath, pbs)
	nap := e.startRun("nap", map[string]any{"for": "4s"})
	gate := e.startRun("gate", nil)
	e.waitParked(2)
	m := e.api("GET", "/api/v1/runs/"+nap, nil).json(t)
	assert.Equal(t, "waiting", m["status"])
	e.stop()

	e = start(t, dir, statePath, pbs)
	assert.Equal(t, float64(2), e.metric("runbook_runs_parked"), "both parked again at start, neither executed")
	r := e.api("GET", "/api/v1/runs/"+gate, nil).json(t)
	assert.Equal(t, true, r["executing"], "the parked run is this server's")

	m = e.waitStatus(nap, state.RunSucceeded)
	started, err := time.Parse(time.RFC3339Nano, m["started_at"].(string))
	require.NoError(t, err)
	ended, err := time.Parse(time.RFC3339Nano, m["ended_at"].(string))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ended.Sub(started), 4*time.Second, "the sleep ended at its first deadline")
	assert.Less(t, ended.Sub(started), 8*time.Second)
	steps := stepsByID(m)
	assert.EqualValues(t, 1, steps["nap"]["attempts"], "the same attempt")
	assert.Equal(t, "succeeded", steps["bye"]["outputs"].(map[string]any)["status"])

	require.Equal(t, 200, e.api("POST", "/api/v1/runs/"+gate+"/approve", map[string]any{"approve": true, "by": "alice"}).status)
	e.waitStatus(gate, state.RunSucceeded)
	e.waitParked(0)
}

// Cancelling a parked run ends it cancelled at once, as an executing run
// would end: its waiting step cancelled, finally run.
func TestCancellingAParkedRunEndsIt(t *testing.T) {
	e := newEnv(t, map[string]string{"nap.yaml": napPlaybook})
	id := e.startRun("nap", nil)
	e.waitParked(1)
	r := e.api("POST", "/api/v1/runs/"+id+"/cancel", nil)
	require.Equal(t, 202, r.status, "%s", r.body)
	m := e.waitStatus(id, state.RunCancelled)
	steps := stepsByID(m)
	assert.Equal(t, "cancelled", steps["nap"]["status"])
	assert.Equal(t, "cancelled", steps["bye"]["outputs"].(map[string]any)["status"])
	e.waitParked(0)
}

// An approval's timeout fires while its run is parked: on_timeout
// answers it at the deadline, with nothing executing the run meanwhile.
func TestAnApprovalTimeoutFiresWhileParked(t *testing.T) {
	e := newEnv(t, map[string]string{"late.yaml": `version: 1
name: late
steps:
  - {id: gate, uses: approval, with: {message: go?, timeout: 2s, on_timeout: approve}}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}"}}
`})
	id := e.startRun("late", nil)
	e.waitParked(1)
	m := e.waitStatus(id, state.RunSucceeded)
	steps := stepsByID(m)
	assert.Equal(t, true, steps["gate"]["outputs"].(map[string]any)["timed_out"])
	assert.Equal(t, "timeout", steps["after"]["outputs"].(map[string]any)["by"])
}

// A parent waiting on a sub-playbook run waiting on an approval is
// parked too; answering the child's approval resumes the parent.
func TestAParentWaitingOnAParkedChildIsParked(t *testing.T) {
	e := newEnv(t, map[string]string{
		"parent.yaml": `version: 1
name: parent
steps:
  - {id: child, uses: playbook, with: {path: child.yml}}
  - {id: after, uses: set, with: {answer: "${{ steps.child.outputs.by }}"}}
`,
		"child.yml": `version: 1
name: child
outputs: {by: "${{ steps.gate.outputs.by }}"}
steps:
  - {id: gate, uses: approval, with: {message: go?}}
`}, func(o *server.Options) {
		o.Engine.Playbooks.Load = func(path string) (*playbook.Playbook, error) { return playbook.Load(path, playbook.LoadOptions{}) }
	})
	runtime.GC()
	before := runtime.NumGoroutine()
	var ids []string
	for range 50 {
		ids = append(ids, e.startRun("parent", nil))
	}
	e.waitParked(50)
	time.Sleep(50 * time.Millisecond)
	assert.Less(t, runtime.NumGoroutine()-before, 20)
	for _, id := range ids {
		r := e.api("POST", "/api/v1/runs/"+id+".child/approve", map[string]any{"approve": true, "by": "alice"})
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	for _, id := range ids {
		m := e.waitStatus(id, state.RunSucceeded)
		assert.Equal(t, "alice", stepsByID(m)["after"]["outputs"].(map[string]any)["answer"])
	}
}

func stepsByID(run map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, s := range run["steps"].([]any) {
		sm := s.(map[string]any)
		out[fmt.Sprint(sm["id"])] = sm
	}
	return out
}

// A run parked on a sleep waits for no one: the API names no approval it
// waits for, and an answer to the sleep step is refused.
func TestAParkedSleepIsNotAnApproval(t *testing.T) {
	e := newEnv(t, map[string]string{"nap.yaml": napPlaybook})
	id := e.startRun("nap", nil)
	e.waitParked(1)
	m := e.api("GET", "/api/v1/runs/"+id, nil).json(t)
	assert.Equal(t, "waiting", m["status"])
	assert.Nil(t, m["waiting_for"])
	assert.NotEmpty(t, stepsByID(m)["nap"]["wake_at"])
	r := e.api("POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "by": "alice"})
	assert.Equal(t, 409, r.status, "%s", r.body)
	r = e.api("POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "by": "alice", "step": "nap"})
	assert.Equal(t, 409, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "not an approval")
}

// A run an earlier build left waiting on an approval with a timeout has
// no wake time in its record: the server finds it in the step's request
// once ready, so the timeout still fires.
func TestAnApprovalTimeoutOfAnEarlierBuildStillFires(t *testing.T) {
	dir, statePath := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	src := `version: 1
name: late
steps:
  - {id: gate, uses: approval, with: {message: go?, timeout: 2s, on_timeout: approve}}
`
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	pb, err := playbook.Parse(filepath.Join(dir, "late.yaml"), []byte(src), playbook.LoadOptions{})
	require.NoError(t, err)
	eng := engine.New(engine.Options{Store: store, Environ: []string{}})
	run, err := eng.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, run.Status)
	run.WakeAt, run.AnswerOnly = time.Time{}, false // as an earlier build recorded it
	require.NoError(t, store.SaveRun(context.Background(), run))
	require.NoError(t, store.Close())

	e := start(t, dir, statePath, map[string]string{"late.yaml": src})
	m := e.waitStatus(run.ID, state.RunSucceeded)
	assert.Equal(t, true, stepsByID(m)["gate"]["outputs"].(map[string]any)["timed_out"])
}

// Cancelling a parent parked on a sub-playbook run parked on an approval
// ends both cancelled: the child is not left waiting for an answer.
func TestCancellingAParentParkedOnAChildEndsBoth(t *testing.T) {
	e := newEnv(t, map[string]string{
		"parent.yaml": `version: 1
name: parent
steps:
  - {id: child, uses: playbook, with: {path: child.yml}}
`,
		"child.yml": `version: 1
name: child
steps:
  - {id: gate, uses: approval, with: {message: go?}}
finally:
  - {id: bye, uses: set, with: {status: "${{ run.status }}"}}
`}, func(o *server.Options) {
		o.Engine.Playbooks.Load = func(path string) (*playbook.Playbook, error) { return playbook.Load(path, playbook.LoadOptions{}) }
	})
	id := e.startRun("parent", nil)
	e.waitParked(1)
	require.Equal(t, 202, e.api("POST", "/api/v1/runs/"+id+"/cancel", nil).status)
	e.waitStatus(id, state.RunCancelled)
	child := e.waitStatus(id+".child", state.RunCancelled)
	steps := stepsByID(child)
	assert.Equal(t, "cancelled", steps["gate"]["status"])
	assert.Equal(t, "cancelled", steps["bye"]["outputs"].(map[string]any)["status"])
	e.waitParked(0)
}
