package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// realTime is a harness on the real clock.
func realTime(t *testing.T) *harness {
	return newHarness(t, func(o *engine.Options) { o.Clock = nil })
}

const gatePlaybook = `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}"}}
`

func TestApproveOfAnAnsweredStepIsAConflict(t *testing.T) {
	h := realTime(t)
	ctx := context.Background()
	r, err := h.run(gatePlaybook, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	require.NoError(t, h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: true, By: "dana"}))
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, state.RunSucceeded, r.Status)
	err = h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: true, By: "erin"})
	assert.Equal(t, fault.Conflict, fault.CodeOf(err))
}

func TestWaitingForEachItemsContinueWhenApproved(t *testing.T) {
	h := realTime(t)
	ctx := context.Background()
	r, err := h.run(`
version: 1
name: fan
steps:
  - {id: gate, uses: approval, for_each: [x, y], max_parallel: 2, with: {message: "go ${{ item }}?"}}
  - {id: after, uses: set, with: {n: "${{ steps.gate.outputs.count }}"}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status, "parked with both items waiting")
	for _, id := range []string{"gate[0]", "gate[1]"} {
		rec, err := h.store.GetStep(ctx, r.ID, id)
		require.NoError(t, err)
		require.Equal(t, state.StepWaiting, rec.Status, id)
		require.NoError(t, h.engine.Approve(ctx, r.ID, id, state.Approval{Approved: true, By: "dana"}))
	}
	got, err := h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, state.RunSucceeded, got.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, 1, recs["gate[0]"].Attempts, "the wait goes on in the same attempt")
	assert.Equal(t, int64(2), toInt(recs["after"].Outputs["n"]))
	assert.Equal(t, 2, countEvents(h, r.ID, "approval.requested"), "each item asked once")
	assert.Equal(t, 2, countEvents(h, r.ID, "step.waiting"))
}

func countEvents(h *harness, runID, typ string) int {
	evs, err := h.store.Events(context.Background(), runID, 0, 0)
	require.NoError(h.t, err)
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case float64:
		return int64(x)
	case string:
		var n int64
		for _, c := range x {
			n = n*10 + int64(c-'0')
		}
		return n
	}
	return -1
}

// A step cut short by a cancellation runs again when the run is resumed,
// without the cancellation's error or end while it does.
func TestAResumedStepCarriesNoStaleError(t *testing.T) {
	h := realTime(t)
	ctx := context.Background()
	pb := h.load(`
version: 1
name: nap
steps:
  - {id: nap, uses: test.block, with: {key: stale, hold: 10s}}
`)
	r, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	testProbe.mu.Lock()
	testProbe.calls["stale"] = 0
	testProbe.mu.Unlock()
	calls := func() int {
		testProbe.mu.Lock()
		defer testProbe.mu.Unlock()
		return testProbe.calls["stale"]
	}
	stepIs := func(want state.StepStatus) func() bool {
		return func() bool {
			rec, err := h.store.GetStep(ctx, r.ID, "nap")
			return err == nil && rec.Status == want
		}
	}
	done := make(chan *state.Run, 1)
	go func() { got, _ := h.engine.Execute(ctx, pb, r); done <- got }()
	require.Eventually(t, func() bool { return calls() == 1 }, 5*time.Second, time.Millisecond)
	require.True(t, h.engine.Cancel(r.ID, nil))
	require.Equal(t, state.RunCancelled, (<-done).Status)
	require.NotNil(t, h.steps(r.ID)["nap"].Error)

	go func() { got, _ := h.engine.Resume(ctx, r.ID); done <- got }()
	require.Eventually(t, func() bool { return calls() == 2 }, 5*time.Second, time.Millisecond)
	require.True(t, stepIs(state.StepRunning)(), "the resumed step is recorded running")
	rec := h.steps(r.ID)["nap"]
	assert.Nil(t, rec.Error, "no error of the cancellation while it runs again")
	assert.True(t, rec.EndedAt.IsZero())
	h.engine.Cancel(r.ID, nil)
	<-done
}
