package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// pauseAll sets in h's engine, as its host does, a pause of every
// playbook by by for reason (by empty: no pause).
func (h *harness) pauseAll(by, reason string) {
	var rules []state.RunPause
	if by != "" {
		rules = []state.RunPause{{ID: "all", Pattern: "*", By: by, Reason: reason}}
	}
	h.engine.SetPauses(rules)
}

// TestAPausedPlaybooksRunFinishesItsStepThenParksAndGoesOnWhenWoken: a
// pause that comes while a step executes lets that step finish, starts
// no other (neither the next one nor a for_each's items), and the run
// parks waiting with who paused it; executed again once the pause is
// lifted, it goes on from the step that did not start, running no step
// twice.
func TestAPausedPlaybooksRunFinishesItsStepThenParksAndGoesOnWhenWoken(t *testing.T) {
	registerTestSteps()
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: paused
steps:
  - id: a
    uses: test.block
    with: {key: pause-a, hold: 300ms}
  - id: b
    uses: test.block
    with: {key: pause-b}
  - id: each
    for_each: [1, 2]
    uses: test.block
    with: {key: pause-each}
`)
	go func() {
		for testProbe.count("pause-a") == 0 {
			time.Sleep(time.Millisecond)
		}
		h.pauseAll("alice", "change freeze")
	}()
	run, err := h.engine.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, run.Status)
	assert.Equal(t, "paused by alice: change freeze", run.Paused)
	stored, err := h.store.GetRun(context.Background(), run.ID)
	require.NoError(t, err)
	assert.Equal(t, "paused by alice: change freeze", stored.Paused, "the reason is on record")
	assert.True(t, stored.WakeAt.IsZero(), "only its host wakes it")
	recs := h.steps(run.ID)
	require.Contains(t, recs, "a")
	assert.Equal(t, state.StepSucceeded, recs["a"].Status, "the step executing finished")
	assert.NotContains(t, recs, "b", "no other step started")
	assert.Equal(t, 0, testProbe.count("pause-b"))
	waiting := h.stored(run.ID, "run.waiting")
	require.NotEmpty(t, waiting)
	assert.Contains(t, waiting[len(waiting)-1].Message, "paused by alice: change freeze")

	_, err = h.engine.Resume(context.Background(), run.ID)
	require.NoError(t, err)
	stored, err = h.store.GetRun(context.Background(), run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, stored.Status, "woken while still paused, it parks again")
	assert.Equal(t, 0, testProbe.count("pause-b"))

	h.pauseAll("", "")
	done, err := h.engine.Resume(context.Background(), run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, done.Status)
	assert.Empty(t, done.Paused)
	assert.Equal(t, 1, testProbe.count("pause-a"), "no step ran twice")
	assert.Equal(t, 1, testProbe.count("pause-b"))
	assert.Equal(t, 2, testProbe.count("pause-each"))
}

// TestAPauseHoldsTheItemsOfAForEachAndTheRunsFirstStep: a run that starts
// while its playbook is paused parks before its first step; one paused
// between two items of a for_each finishes the item executing and parks
// with the rest unstarted.
func TestAPauseHoldsTheItemsOfAForEachAndTheRunsFirstStep(t *testing.T) {
	registerTestSteps()
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: paused-items
steps:
  - id: each
    for_each: [1, 2, 3]
    uses: test.block
    with: {key: "item-${{ item }}", hold: 200ms}
`)
	go func() {
		for testProbe.count("item-1") == 0 {
			time.Sleep(time.Millisecond)
		}
		h.pauseAll("bob", "freeze")
	}()
	run, err := h.engine.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, run.Status)
	assert.Equal(t, 1, testProbe.count("item-1"))
	assert.Equal(t, 0, testProbe.count("item-2"), "no item started after the pause")

	first, err := h.engine.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, first.Status, "a new run parks before its first step")
	assert.Equal(t, 1, testProbe.count("item-1"))

	h.pauseAll("", "")
	for _, id := range []string{run.ID, first.ID} {
		done, err := h.engine.Resume(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, state.RunSucceeded, done.Status)
	}
	assert.Equal(t, 2, testProbe.count("item-1"), "once per run")
	assert.Equal(t, 2, testProbe.count("item-3"))
}
