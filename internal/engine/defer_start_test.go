package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// writeCounter counts a run's writes (commits) and records the stored
// run's status when an intent is written.
type writeCounter struct {
	state.Store
	mu            sync.Mutex
	writes        int
	intentStatus  []state.RunStatus
	intentStarted []bool
}

func (w *writeCounter) count() {
	w.mu.Lock()
	w.writes++
	w.mu.Unlock()
}

func (w *writeCounter) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	w.count()
	return w.Store.SaveRun(ctx, r, evs...)
}

func (w *writeCounter) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	w.count()
	return w.Store.SaveRunSteps(ctx, r, recs, evs...)
}

func (w *writeCounter) SaveSteps(ctx context.Context, recs []*state.StepRecord, evs ...state.Event) error {
	w.count()
	return w.Store.SaveSteps(ctx, recs, evs...)
}

func (w *writeCounter) AppendEvents(ctx context.Context, id string, evs ...state.Event) error {
	w.count()
	return w.Store.AppendEvents(ctx, id, evs...)
}

func (w *writeCounter) PutIntent(ctx context.Context, in state.Intent) error {
	r, err := w.Store.GetRun(ctx, in.RunID)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.intentStatus = append(w.intentStatus, r.Status)
	w.intentStarted = append(w.intentStarted, !r.StartedAt.IsZero())
	w.mu.Unlock()
	return w.Store.PutIntent(ctx, in)
}

// countedHarness is a harness whose store counts the run's writes, with
// the run's start deferred to its first write or not.
func countedHarness(t *testing.T, deferStart bool) (*harness, *writeCounter) {
	var w *writeCounter
	h := newHarness(t, func(o *engine.Options) {
		w = &writeCounter{Store: o.Store}
		o.Store, o.Host.DeferStart = w, deferStart
	})
	return h, w
}

func TestADeferredStartIsWrittenWithTheRunsFirstWrite(t *testing.T) {
	const pure = `
version: 1
name: pure
steps:
  - {id: a, uses: log, with: {message: one}}
  - {id: b, uses: set, with: {values: {x: 1}}}
`
	for _, deferStart := range []bool{false, true} {
		h, w := countedHarness(t, deferStart)
		r, err := h.run(pure, nil)
		require.NoError(t, err)
		assert.Equal(t, state.RunSucceeded, r.Status)
		want := 2 // the start, then the steps with the run's end
		if deferStart {
			want = 1
		}
		assert.Equal(t, want, w.writes, "writes after the run's creation, DeferStart %v", deferStart)
		var types []string
		for _, ev := range h.stored(r.ID, "") {
			types = append(types, ev.Type)
		}
		assert.Equal(t, []string{"run.created", "run.started", "step.started", "log", "step.succeeded", "step.started", "step.succeeded", "run.succeeded"}, types)
		assert.Equal(t, []string{"run.started "}, h.eventOrder("run.started"), "observed once")
		stored, err := h.store.GetRun(context.Background(), r.ID)
		require.NoError(t, err)
		assert.False(t, stored.StartedAt.IsZero())
	}
}

func TestADeferredStartIsOnRecordBeforeASideEffect(t *testing.T) {
	testProbe.reset()
	h, w := countedHarness(t, true)
	r, err := h.run(`
version: 1
name: creates
steps:
  - {id: a, uses: log, with: {message: before}}
  - {id: make, uses: test.create, with: {name: vm-1}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	require.NotEmpty(t, w.intentStatus)
	assert.Equal(t, state.RunRunning, w.intentStatus[0], "the stored run when the intent is written")
	assert.True(t, w.intentStarted[0])
}
