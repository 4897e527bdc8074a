package runner

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/all"
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

// newTestHost is a host over a real bbolt file, with the note playbook,
// counting what it recovers.
func newTestHost(t testing.TB) (*Host, *playbook.Playbook, state.Store, *countingMetrics) {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	pb, err := playbook.Parse("note.yaml", []byte(notePlaybook), playbook.LoadOptions{})
	require.NoError(t, err)
	m := &countingMetrics{recovered: map[string]int{}}
	h := New(Options{Engine: engine.Options{Store: store, Environ: []string{}}, Metrics: m})
	h.Remember(pb)
	t.Cleanup(func() {
		h.Suspend(5 * time.Second)
		_ = store.Close()
	})
	return h, pb, store, m
}

// countingMetrics counts what a host reports.
type countingMetrics struct {
	mu        sync.Mutex
	recovered map[string]int
}

func (m *countingMetrics) Recovered(how string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovered[how]++
}
func (*countingMetrics) Fenced(string)       {}
func (*countingMetrics) Seed([]*state.Run)   {}
func (*countingMetrics) Launched(*state.Run) {}

func (m *countingMetrics) count(how string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recovered[how]
}

func waitRun(t *testing.T, store state.Store, id string, want state.RunStatus) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := store.GetRun(context.Background(), id)
		return err == nil && r.Status == want
	}, 5*time.Second, 5*time.Millisecond, "run %s never %s", id, want)
}

func TestRunnerPreparesAndLaunches(t *testing.T) {
	ctx := context.Background()
	r, pb, store, _ := newTestHost(t)
	req := trigger.StartRequest{Playbook: pb, Inputs: map[string]any{"who": "zebra-unique-79"}, Trigger: map[string]any{"type": "webhook"}}
	commit := func(run *state.Run, evs []state.Event) {
		t.Helper()
		_, err := store.CommitDelivery(ctx, state.Delivery{Key: "d-" + run.ID, Units: []state.DeliveryUnit{{Run: run, Events: evs}}})
		require.NoError(t, err)
	}

	t.Run("a prepared run, once committed, is launched and executes", func(t *testing.T) {
		run, evs, err := r.Prepare(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, "***", run.Inputs["who"])
		commit(run, evs)
		r.Launch(run)
		waitRun(t, store, run.ID, state.RunSucceeded)
		got, err := store.Events(ctx, run.ID, 0, 0)
		require.NoError(t, err)
		assert.Equal(t, "run.created", got[0].Type)
		assert.Zero(t, r.preparedCount())
	})

	t.Run("runs prepared but never launched are dropped after two generations", func(t *testing.T) {
		var runs []*state.Run
		for range 3 {
			run, _, err := r.Prepare(ctx, req)
			require.NoError(t, err)
			runs = append(runs, run)
		}
		assert.Equal(t, 3, r.preparedCount())
		age := func() {
			r.mu.Lock()
			r.rotated = r.rotated.Add(-preparedTTL)
			r.mu.Unlock()
		}
		age()
		late, evs, err := r.Prepare(ctx, req) // rotates: the three are now the old generation
		require.NoError(t, err)
		assert.Equal(t, 4, r.preparedCount())
		age()
		_, _, err = r.Prepare(ctx, req) // rotates again: the three are dropped
		require.NoError(t, err)
		assert.Equal(t, 2, r.preparedCount())

		commit(late, evs)
		r.Launch(late) // from the old generation
		waitRun(t, store, late.ID, state.RunSucceeded)
		assert.Equal(t, 1, r.preparedCount())

		commit(runs[0], []state.Event{{Type: "run.created"}})
		r.Launch(runs[0]) // dropped: executed from its record, which masks the secret input
		waitRun(t, store, runs[0].ID, state.RunCancelled)
		got, err := store.GetRun(ctx, runs[0].ID)
		require.NoError(t, err)
		assert.Contains(t, got.Error.Message, "secret input who", "cancelled, not run with the mask for a value")
	})

	t.Run("Prepare refuses once the server is shutting down", func(t *testing.T) {
		r.Suspend(5 * time.Second)
		_, _, err := r.Prepare(ctx, req)
		assert.ErrorIs(t, err, ErrShuttingDown)
	})
}

// TestTheWatchdogResumesAnUnfinishedRunWithoutAnExecutor: a run committed
// but never launched (its launch lost) is taken up by the watchdog once
// it is older than the bound, runs to its end, and is counted; a run
// executing here, a recent one and a sub-playbook run are left alone.
func TestTheWatchdogResumesAnUnfinishedRunWithoutAnExecutor(t *testing.T) {
	ctx := context.Background()
	r, pb, store, metrics := newTestHost(t)
	commit := func() *state.Run {
		t.Helper()
		run, evs, err := r.eng.Prepare(pb, engine.StartRequest{Trigger: map[string]any{"type": "api"}})
		require.NoError(t, err)
		_, err = store.CommitDelivery(ctx, state.Delivery{Key: "d-" + run.ID, Units: []state.DeliveryUnit{{Run: run, Events: []state.Event{evs}}}})
		require.NoError(t, err)
		return run
	}
	lost := commit()
	assert.Zero(t, r.adoptOrphans(ctx, time.Hour), "a run younger than the bound may still be launched")
	child := commit()
	child.ParentID = lost.ID
	require.NoError(t, store.SaveRun(ctx, child))

	assert.Equal(t, 1, r.adoptOrphans(ctx, 0), "the lost run only (not its sub-playbook run)")
	waitRun(t, store, lost.ID, state.RunSucceeded)
	assert.Zero(t, r.adoptOrphans(ctx, 0), "a finished run is not taken up again")

	assert.Equal(t, 1, metrics.count("orphaned"), "counted (runbook_runs_recovered_total{reason=\"orphaned\"})")
}

// A run parked here is cancelled through its host: it is executed once
// more and ends cancelled as an executing run would (its waiting steps
// cancelled, finally run). An answer that decides its approval, given
// through the host, wakes it at once: it goes on to its end.
func TestAParkedRunIsCancelledAndAnsweredThroughItsHost(t *testing.T) {
	ctx := context.Background()
	h, _, store, _ := newTestHost(t)
	pb := gatePlaybook(t)
	parked := func() *state.Run {
		t.Helper()
		run, err := h.StartRun(ctx, pb, engine.StartRequest{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { _, p := h.Holding(run.ID); return p }, 5*time.Second, time.Millisecond, "never parked")
		return run
	}

	run := parked()
	require.True(t, h.CancelRun(run.ID, nil), "held here")
	waitRun(t, store, run.ID, state.RunCancelled)
	recs, err := store.Steps(ctx, run.ID)
	require.NoError(t, err)
	byID := map[string]*state.StepRecord{}
	for _, rec := range recs {
		byID[rec.ID] = rec
	}
	assert.Equal(t, state.StepCancelled, byID["gate"].Status)
	assert.Equal(t, "cancelled", byID["bye"].Outputs["status"])
	require.Eventually(t, func() bool { return !h.Holds(run.ID) }, 5*time.Second, time.Millisecond, "ended: no longer held")

	run = parked()
	require.NoError(t, h.Approve(ctx, run.ID, "gate", state.Approval{Approved: true, By: "alice"}))
	waitRun(t, store, run.ID, state.RunSucceeded)
	require.Eventually(t, func() bool { return !h.Holds(run.ID) }, 5*time.Second, time.Millisecond, "ended: no longer held")
	assert.False(t, h.CancelRun(run.ID, nil), "an ended run is not held")
}

// A run taken from the replicas' queue while an execution of it here was
// letting it go (its claim refused, or its write fenced, by the owner it
// had a moment before, whose lease then lapsed) is not stranded: the
// store says it is this replica's, so no other replica takes it, and the
// slot's release takes it up again. Without that, the run stayed pending,
// owned by a live replica that held nothing of it.
func TestARunTakenWhileItsExecutionLetsItGoIsTakenUpAgain(t *testing.T) {
	ctx := context.Background()
	h, pb, store, _ := newTestHost(t)
	run, evs, err := h.eng.Prepare(pb, engine.StartRequest{Inputs: map[string]any{"who": "x"}, Trigger: map[string]any{"type": "api"}})
	require.NoError(t, err)
	_, err = store.CommitDelivery(ctx, state.Delivery{Key: "d-" + run.ID, Units: []state.DeliveryUnit{{Run: run, Events: []state.Event{evs}}}})
	require.NoError(t, err)

	// An execution of it holds a slot here: takeRuns finds it held.
	h.mu.Lock()
	h.active[run.ID] = &runSlot{playbook: pb.Name}
	h.slots++
	h.mu.Unlock()
	require.True(t, h.retake(run.ID), "held here")

	h.release(run.ID) // the execution lets it go, unfinished
	require.Eventually(t, func() bool {
		r, err := store.GetRun(ctx, run.ID)
		return err == nil && r.Status.Done()
	}, 5*time.Second, 5*time.Millisecond, "taken up again, to its end")
	require.Eventually(t, func() bool { return !h.Holds(run.ID) }, 5*time.Second, time.Millisecond, "its slot given back once ended")
}
