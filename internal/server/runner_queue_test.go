package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/trigger"
)

const notePlaybook = `version: 1
name: note
inputs:
  who: {type: string, secret: true}
steps:
  - id: a
    uses: log
    with: {message: "hi ${{ inputs.who }}"}
`

// gate is what the test_block step waits on: each receive from release
// lets one blocked step end; started lists the runs whose step started,
// in order.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	started []string
}

func (g *gate) startedRuns() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.started...)
}

var (
	gateMu  sync.Mutex
	theGate *gate
)

func init() {
	steps.Register(steps.Define(steps.Def[struct{}]{
		Type:    "test_block",
		Summary: "Block until the test releases it (runner queue tests only).",
		Run: func(ctx context.Context, c *steps.Call, _ *struct{}) (steps.Outputs, error) {
			gateMu.Lock()
			g := theGate
			gateMu.Unlock()
			g.mu.Lock()
			g.started = append(g.started, c.RunID)
			g.mu.Unlock()
			select {
			case <-g.release:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		},
	}))
}

// newGate installs a fresh gate for the test_block steps.
func newGate(t *testing.T) *gate {
	g := &gate{release: make(chan struct{})}
	gateMu.Lock()
	theGate = g
	gateMu.Unlock()
	return g
}

const blockPlaybook = `version: 1
name: block
steps:
  - id: wait
    uses: test_block
`

const askPlaybook = `version: 1
name: ask
steps:
  - id: ok
    uses: approval
    with: {message: "go on?"}
`

// newQueueServer is a server (not serving) executing at most maxRunning
// runs, over store, with the block, ask and note playbooks.
func newQueueServer(t *testing.T, store state.Store, maxRunning int) *Server {
	t.Helper()
	dir := t.TempDir()
	for name, src := range map[string]string{"block.yaml": blockPlaybook, "ask.yaml": askPlaybook, "note.yaml": notePlaybook} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	s, err := New(Options{Engine: engine.Options{Store: store, Environ: []string{}}, Playbooks: dir, MaxRunning: maxRunning})
	require.NoError(t, err)
	t.Cleanup(func() { s.runs.Suspend(5 * time.Second) })
	return s
}

func openStore(t *testing.T) state.Store {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func playbookOf(t *testing.T, s *Server, name string) trigger.StartRequest {
	t.Helper()
	for _, pb := range s.cat.all() {
		if pb.Name == name {
			req := trigger.StartRequest{Playbook: pb, Trigger: map[string]any{"type": "api"}}
			if len(pb.Inputs) > 0 {
				req.Inputs = map[string]any{"who": "x"}
			}
			return req
		}
	}
	t.Fatalf("no playbook %s", name)
	return trigger.StartRequest{}
}

func waitStarted(t *testing.T, g *gate, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(g.startedRuns()) >= n }, 5*time.Second, time.Millisecond, "%d runs never started", n)
}

// assertQueue checks what the server says of its runs: executing and
// queued here, in the metrics, and pending in the store.
func assertQueue(t *testing.T, s *Server, g *gate, executing, queued int, ids []string) {
	t.Helper()
	assert.Len(t, g.startedRuns(), executing)
	assert.Equal(t, executing, s.runs.Running())
	assert.Equal(t, queued, s.runs.Queued())
	m := scrape(s).String()
	assert.Regexp(t, `(?m)^runbook_runs_executing `+strconv.Itoa(executing)+`$`, m)
	assert.Regexp(t, `(?m)^runbook_runs_queued `+strconv.Itoa(queued)+`$`, m)
	pending := 0
	for _, id := range ids {
		run, err := s.store.GetRun(context.Background(), id)
		require.NoError(t, err)
		assert.True(t, s.runs.Holds(id), "a queued run is owned here: the watchdog leaves it alone")
		if run.Status == state.RunPending {
			pending++
		}
	}
	assert.GreaterOrEqual(t, pending, queued, "every queued run is committed pending")
}

// releaseInOrder lets the blocked runs end one at a time and checks that
// each freed slot starts the next run in creation order.
func releaseInOrder(t *testing.T, g *gate, ids []string, running int) {
	t.Helper()
	for k := running; k < len(ids); k++ {
		g.release <- struct{}{}
		waitStarted(t, g, k+1)
		assert.Len(t, g.startedRuns(), k+1, "one ended run starts exactly one queued run")
	}
	for range running {
		g.release <- struct{}{}
	}
	started := g.startedRuns()
	assert.ElementsMatch(t, ids[:running], started[:running], "the oldest runs start first")
	assert.Equal(t, ids[running:], started[running:], "queued runs start in creation order")
}

func TestAtMostMaxRunningRunsExecuteAndTheRestWaitInCreationOrder(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	s := newQueueServer(t, store, 2)
	g := newGate(t)
	req := playbookOf(t, s, "block")
	var ids []string
	for range 10 {
		id, err := s.runs.Start(ctx, req)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	waitStarted(t, g, 2)
	assertQueue(t, s, g, 2, 8, ids)

	releaseInOrder(t, g, ids, 2)
	for _, id := range ids {
		waitRun(t, store, id, state.RunSucceeded)
	}
	require.Eventually(t, func() bool { return s.runs.Running() == 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, s.runs.Queued())
}

func TestARestartResumesQueuedRunsUnderTheLimit(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	first := newQueueServer(t, store, 2)
	g := newGate(t)
	req := playbookOf(t, first, "block")
	var ids []string
	for range 10 {
		id, err := first.runs.Start(ctx, req)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	waitStarted(t, g, 2)
	first.runs.Suspend(5 * time.Second)
	assert.Zero(t, first.runs.Queued(), "a stopping server drops its queue: the runs stay committed")
	for _, id := range ids {
		run, err := store.GetRun(ctx, id)
		require.NoError(t, err)
		assert.False(t, run.Status.Done(), "run %s is left for the next start", id)
	}

	second := newQueueServer(t, store, 2)
	g = newGate(t)
	n, err := second.runs.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	waitStarted(t, g, 2)
	assertQueue(t, second, g, 2, 8, ids)
	releaseInOrder(t, g, ids, 2)
	for _, id := range ids {
		waitRun(t, store, id, state.RunSucceeded)
	}
}

func TestAQueuedRunCancelledNeverStarts(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	s := newQueueServer(t, store, 1)
	g := newGate(t)
	req := playbookOf(t, s, "block")
	first, err := s.runs.Start(ctx, req)
	require.NoError(t, err)
	queued, err := s.runs.Start(ctx, req)
	require.NoError(t, err)
	waitStarted(t, g, 1)
	require.Equal(t, 1, s.runs.Queued())

	s.runs.Cancel(queued) // as a schedule's overlap: replace does
	assert.Zero(t, s.runs.Queued())
	assert.Equal(t, []string{first}, s.runs.Active("block"), "the cancelled run is no longer this server's")
	got, err := store.GetRun(ctx, queued)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status)

	g.release <- struct{}{}
	waitRun(t, store, first, state.RunSucceeded)
	require.Eventually(t, func() bool { return s.runs.Running() == 0 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{first}, g.startedRuns(), "the cancelled run never started")
	got, err = store.GetRun(ctx, queued)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status)
}

func TestARunWaitingForAnApprovalGivesItsSlotBack(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	s := newQueueServer(t, store, 1)
	ask, err := s.runs.Start(ctx, playbookOf(t, s, "ask"))
	require.NoError(t, err)
	waitRun(t, store, ask, state.RunWaiting)

	note, err := s.runs.Start(ctx, playbookOf(t, s, "note"))
	require.NoError(t, err)
	waitRun(t, store, note, state.RunSucceeded)
	assert.Equal(t, 1, s.runs.Running(), "the waiting run still executes here")

	require.NoError(t, s.runs.Approve(ctx, ask, "ok", state.Approval{Approved: true, By: "test"}))
	waitRun(t, store, ask, state.RunSucceeded)
	require.Eventually(t, func() bool { return s.runs.Running() == 0 }, 5*time.Second, time.Millisecond)
	// Every slot given back: with one slot, a new run executes at once
	// instead of waiting in the queue.
	again, err := s.runs.Start(ctx, playbookOf(t, s, "note"))
	require.NoError(t, err)
	waitRun(t, store, again, state.RunSucceeded)
	assert.Zero(t, s.runs.Queued(), "every slot given back")
}
