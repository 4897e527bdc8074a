package runner

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// keyHost is the embedded host `runbook run` opens, over a real bbolt
// file in dir, whose key poll is an hour: only a release wakes a run
// parked on a key within a test. Its warnings go to logs.
func keyHost(t *testing.T, dir string, logs *syncBuffer) (*Host, state.Store) {
	t.Helper()
	store, err := bolt.Open(filepath.Join(dir, "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := New(Options{Embedded: true, KeyPoll: time.Hour, Logger: logger, Engine: engine.Options{
		Store: store, Environ: []string{"PATH=" + os.Getenv("PATH")}, Logger: logger,
	}})
	require.NoError(t, h.Open(context.Background()))
	t.Cleanup(func() {
		h.Close()
		_ = store.Close()
	})
	return h, store
}

// keyPlaybook holds the-key with on_busy; its step appends "start" and
// "end" to ledger around a wait for the file gate (or, with hold, until
// cancelled).
func keyPlaybook(t *testing.T, dir, onBusy string) *playbook.Playbook {
	t.Helper()
	src := `version: 1
name: keyed
inputs:
  hold: {type: boolean, default: false}
concurrency: {key: the-key, on_busy: ` + onBusy + `}
steps:
  - id: work
    uses: shell
    with:
      command: |
        echo start >> ledger
        if [ "${{ inputs.hold }}" = true ]; then sleep 60; fi
        while [ ! -f gate ]; do sleep 0.01; done
        echo end >> ledger
      dir: ` + dir + `
`
	pb, err := playbook.Parse(filepath.Join(dir, "keyed.yaml"), []byte(src), playbook.LoadOptions{})
	require.NoError(t, err)
	return pb
}

func events(t *testing.T, store state.Store, runID, typ string) []state.Event {
	t.Helper()
	evs, err := store.Events(context.Background(), runID, 0, 0)
	require.NoError(t, err)
	var out []state.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// queuedBehind starts two runs of the-key with on_busy: queue, the second
// once the first's step started, and lets the first end once the second
// is recorded queued. It returns both, awaited to their ends.
func queuedBehind(t *testing.T, h *Host, store state.Store, dir string) (first, second *state.Run) {
	t.Helper()
	ctx := context.Background()
	pb := keyPlaybook(t, dir, "queue")
	a, err := h.Execute(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "ledger")); return len(b) > 0 }, 10*time.Second, time.Millisecond)
	b, err := h.Execute(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(events(t, store, b.ID, "run.queued")) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600))
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	first, err = h.Await(ctx, a.ID, false)
	require.NoError(t, err)
	second, err = h.Await(ctx, b.ID, false)
	require.NoError(t, err)
	return first, second
}

// A run queued on a concurrency key starts as soon as a run of this
// process releases the key, not at the next poll (an hour here). (Was the
// engine's TestQueuedRunStartsWhenTheKeyIsReleased, when the engine waited
// for keys in process; the host keeps the queue now.)
func TestQueuedRunStartsWhenTheKeyIsReleased(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	h, store := keyHost(t, dir, &logs)
	start := time.Now()
	first, second := queuedBehind(t, h, store, dir)
	assert.Equal(t, state.RunSucceeded, first.Status)
	assert.Equal(t, state.RunSucceeded, second.Status)
	ledger, err := os.ReadFile(filepath.Join(dir, "ledger"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(ledger), "start"), "both runs executed their step")
	assert.Less(t, time.Since(start), 5*time.Second, "the queued run was woken by the release, not the poll")
}

// Runs sharing a concurrency key with on_busy: queue never overlap: the
// queued one is recorded queued once, and starts when the key is
// released. (Was the engine's TestQueuedRunsNeverOverlap.)
func TestQueuedRunsNeverOverlap(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	h, store := keyHost(t, dir, &logs)
	_, second := queuedBehind(t, h, store, dir)
	assert.Equal(t, state.RunSucceeded, second.Status)
	ledger, err := os.ReadFile(filepath.Join(dir, "ledger"))
	require.NoError(t, err)
	assert.Equal(t, "start\nend\nstart\nend\n", string(ledger), "the runs never held the key together")
	assert.Len(t, events(t, store, second.ID, "run.queued"), 1)
	assert.Empty(t, logs.String(), "waiting on the key went without a problem")
}

// A run started with on_busy: cancel_running cancels the run holding its
// key, which ends cancelled, saying by which run, then takes the key.
// (Was the engine's TestCancelRunningCancelsTheRunHoldingTheKey.)
func TestCancelRunningCancelsTheRunHoldingTheKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var logs syncBuffer
	h, store := keyHost(t, dir, &logs)
	pb := keyPlaybook(t, dir, "cancel_running")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600))
	_, err := h.Execute(ctx, pb, engine.StartRequest{ID: "holder", Inputs: map[string]any{"hold": true}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(filepath.Join(dir, "ledger")); return len(b) > 0 }, 10*time.Second, time.Millisecond)
	_, err = h.Execute(ctx, pb, engine.StartRequest{ID: "taker"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	taker, err := h.Await(ctx, "taker", false)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, taker.Status)

	held, err := h.Await(ctx, "holder", false)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, held.Status)
	require.NotNil(t, held.Error)
	assert.Equal(t, string(fault.Cancelled), held.Error.Code)
	assert.Equal(t, `run cancelled: cancelled by run taker sharing concurrency key "the-key"`, held.Error.Message)
	recs, err := store.Steps(ctx, "holder")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, state.StepCancelled, recs[0].Status)
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
