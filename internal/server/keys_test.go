package server_test

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// keyed playbooks: holder takes key k and waits (an approval, or a long
// sleep), queued waits for k, free has no key.
var keyedPlaybooks = map[string]string{
	"holder.yaml": `version: 1
name: holder
concurrency: {key: k, on_busy: queue}
steps:
  - {id: gate, uses: approval, with: {message: go?}}
`,
	"sleeper.yaml": `version: 1
name: sleeper
concurrency: {key: k, on_busy: queue}
steps:
  - {id: nap, uses: sleep, with: {duration: 1h}}
`,
	"queued.yaml": `version: 1
name: queued
inputs:
  n: {type: integer, default: 0}
concurrency: {key: k, on_busy: queue}
steps:
  - {id: one, uses: set, with: {n: "${{ inputs.n }}"}}
`,
	"taker.yaml": `version: 1
name: taker
concurrency: {key: k, on_busy: cancel_running}
steps:
  - {id: one, uses: set, with: {ok: true}}
`,
	"free.yaml": `version: 1
name: free
steps:
  - {id: one, uses: set, with: {ok: true}}
`,
}

func maxRunning(n int) envOption { return func(o *server.Options) { o.MaxRunning = n } }

// endedInOrder checks that runs ids (created in this order) ended one
// after the other in that order.
func (e *env) endedInOrder(ids []string) {
	e.t.Helper()
	var ends []time.Time
	for _, id := range ids {
		m := e.waitStatus(id, state.RunSucceeded)
		end, err := time.Parse(time.RFC3339Nano, m["ended_at"].(string))
		require.NoError(e.t, err)
		ends = append(ends, end)
	}
	assert.True(e.t, slices.IsSortedFunc(ends, func(a, b time.Time) int { return a.Compare(b) }),
		"the runs queued on the key ended in the order they were created: %v", ends)
}

// A hundred runs queued on a key held by a run waiting for an approval
// are parked under serve: no goroutine and no slot each (with
// max_running 4, a run of another playbook still executes at once). Once
// the key is released they run one at a time, in the order they were
// created.
func TestRunsQueuedOnAKeyHoldNoGoroutineNorSlotAndRunInOrder(t *testing.T) {
	e := newEnv(t, keyedPlaybooks, maxRunning(4))
	holder := e.startRun("holder", nil)
	e.waitParked(1)
	runtime.GC()
	before := runtime.NumGoroutine()
	var ids []string
	for i := range 100 {
		ids = append(ids, e.startRun("queued", map[string]any{"n": i}))
	}
	e.waitParked(101)
	m := e.api("GET", "/api/v1/runs/"+ids[50], nil).json(t)
	assert.Equal(t, "waiting", m["status"])
	assert.Equal(t, true, m["executing"], "this server holds it")
	assert.Equal(t, true, m["parked"], "parked, with no goroutine")
	time.Sleep(50 * time.Millisecond) // let the runs' goroutines end
	grown := runtime.NumGoroutine() - before
	assert.Less(t, grown, 20, "100 runs are queued on the key, the goroutines grew by %d", grown)

	free := e.startRun("free", nil)
	e.waitStatus(free, state.RunSucceeded)
	assert.Nil(t, e.api("GET", "/api/v1/runs/"+free, nil).json(t)["parked"], "a run that ended is not parked")
	assert.Equal(t, "waiting", e.api("GET", "/api/v1/runs/"+ids[0], nil).json(t)["status"], "the key is still held")

	r := e.api("POST", "/api/v1/runs/"+holder+"/approve", map[string]any{"approve": true, "by": "alice"})
	require.Equal(t, 200, r.status, "%s", r.body)
	e.waitStatus(holder, state.RunSucceeded)
	e.endedInOrder(ids)
	e.waitParked(0)
}

// Runs parked on a key survive a restart: parked again at start (not
// executed), and woken when the key is released. A key freed while the
// server was stopped wakes them at once at the next start.
func TestRunsQueuedOnAKeyAreParkedAgainAfterARestart(t *testing.T) {
	dir, statePath := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	e := start(t, dir, statePath, keyedPlaybooks)
	holder := e.startRun("sleeper", nil)
	e.waitParked(1)
	var ids []string
	for i := range 3 {
		ids = append(ids, e.startRun("queued", map[string]any{"n": i}))
	}
	e.waitParked(4)
	e.stop()

	e = start(t, dir, statePath, keyedPlaybooks)
	assert.Equal(t, float64(4), e.metric("runbook_runs_parked"), "all parked again at start, none executed")
	for _, id := range ids {
		assert.Equal(t, "waiting", e.api("GET", "/api/v1/runs/"+id, nil).json(t)["status"])
	}
	require.Equal(t, 202, e.api("POST", "/api/v1/runs/"+holder+"/cancel", nil).status)
	e.endedInOrder(ids)
	e.waitParked(0)

	// Queued again, then the holder ends while no server runs.
	holder = e.startRun("sleeper", nil)
	e.waitParked(1)
	ids = ids[:0]
	for i := range 3 {
		ids = append(ids, e.startRun("queued", map[string]any{"n": i}))
	}
	e.waitParked(4)
	e.stop()
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	run, err := store.GetRun(ctx, holder)
	require.NoError(t, err)
	run.Status, run.EndedAt = state.RunCancelled, time.Now()
	require.NoError(t, store.SaveRun(ctx, run))
	require.NoError(t, store.ReleaseLock(ctx, "k", holder))
	require.NoError(t, store.Close())

	e = start(t, dir, statePath, keyedPlaybooks)
	e.endedInOrder(ids)
	e.waitParked(0)
}

// A parked run queued on a key is cancelled like any parked run.
func TestCancellingARunQueuedOnAKeyEndsIt(t *testing.T) {
	e := newEnv(t, keyedPlaybooks)
	e.startRun("sleeper", nil)
	e.waitParked(1)
	id := e.startRun("queued", nil)
	e.waitParked(2)
	require.Equal(t, 202, e.api("POST", "/api/v1/runs/"+id+"/cancel", nil).status)
	e.waitStatus(id, state.RunCancelled)
	e.waitParked(1)
}
