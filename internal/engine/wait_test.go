package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// realTimeWait is a harness on the real clock with ApprovalWait and a poll
// period far longer than any test: only an in-process wake can end a wait.
func realTimeWait(t *testing.T) *harness {
	return newHarness(t, func(o *engine.Options) {
		o.Clock = nil // real time: the fake clock would skip the hour
		o.Approvals = engine.ApprovalWait
		o.ApprovalPoll = time.Hour
	})
}

const gatePlaybook = `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}"}}
`

// executeAsync starts a run and executes it in a goroutine, as the server does.
func executeAsync(t *testing.T, h *harness, ctx context.Context, src string) (string, <-chan *state.Run) {
	t.Helper()
	pb := h.load(src)
	r, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	done := make(chan *state.Run, 1)
	go func() {
		got, _ := h.engine.Execute(ctx, pb, r)
		done <- got
	}()
	require.Eventually(t, func() bool {
		rec, err := h.store.GetStep(context.Background(), r.ID, "gate")
		return err == nil && rec.Status == state.StepWaiting
	}, 5*time.Second, time.Millisecond)
	return r.ID, done
}

func TestApproveWakesAWaitingStepAtOnce(t *testing.T) {
	h := realTimeWait(t)
	runID, done := executeAsync(t, h, context.Background(), gatePlaybook)

	start := time.Now()
	go func() {
		_ = h.engine.Approve(context.Background(), runID, "gate", state.Approval{Approved: true, By: "dana"})
	}()
	select {
	case r := <-done:
		require.Equal(t, state.RunSucceeded, r.Status)
		assert.Less(t, time.Since(start), 2*time.Second, "the approval took effect at once, not at the next hourly poll")
		assert.Equal(t, "dana", h.steps(runID)["after"].Outputs["by"])
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not continue after the approval (it waits for the hourly poll)")
	}
}

func TestCancellingAWaitingRunEndsItsWait(t *testing.T) {
	h := realTimeWait(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runID, done := executeAsync(t, h, ctx, gatePlaybook)

	assert.True(t, h.engine.Cancel(runID, nil))
	select {
	case r := <-done:
		assert.Equal(t, state.RunCancelled, r.Status)
		assert.Equal(t, state.StepCancelled, h.steps(runID)["gate"].Status)
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled run kept waiting")
	}
}

func TestApprovalDeadlineEndsAWaitLongerThanThePoll(t *testing.T) {
	h := realTimeWait(t)
	_, done := executeAsync(t, h, context.Background(), `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: "go?", timeout: 300ms}}
`)
	select {
	case r := <-done:
		require.Equal(t, state.RunFailed, r.Status)
		assert.Equal(t, "timeout", r.Error.Code)
	case <-time.After(5 * time.Second):
		t.Fatal("the approval's deadline was not honoured")
	}
}

func TestApproveOfAnAnsweredStepIsAConflict(t *testing.T) {
	h := realTimeWait(t)
	runID, done := executeAsync(t, h, context.Background(), gatePlaybook)
	require.NoError(t, h.engine.Approve(context.Background(), runID, "gate", state.Approval{Approved: true, By: "dana"}))
	<-done
	err := h.engine.Approve(context.Background(), runID, "gate", state.Approval{Approved: true, By: "erin"})
	assert.Equal(t, fault.Conflict, fault.CodeOf(err))
}

func TestWaitingForEachItemsContinueWhenApproved(t *testing.T) {
	h := realTimeWait(t)
	pb := h.load(`
version: 1
name: fan
steps:
  - {id: gate, uses: approval, for_each: [x, y], max_parallel: 2, with: {message: "go ${{ item }}?"}}
  - {id: after, uses: set, with: {n: "${{ steps.gate.outputs.count }}"}}
`)
	r, err := h.engine.Start(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	done := make(chan *state.Run, 1)
	go func() {
		got, _ := h.engine.Execute(context.Background(), pb, r)
		done <- got
	}()
	for _, id := range []string{"gate[0]", "gate[1]"} {
		require.Eventually(t, func() bool {
			rec, err := h.store.GetStep(context.Background(), r.ID, id)
			return err == nil && rec.Status == state.StepWaiting
		}, 5*time.Second, time.Millisecond)
		require.NoError(t, h.engine.Approve(context.Background(), r.ID, id, state.Approval{Approved: true, By: "dana"}))
	}
	select {
	case got := <-done:
		require.Equal(t, state.RunSucceeded, got.Status)
		recs := h.steps(r.ID)
		assert.Equal(t, 1, recs["gate[0]"].Attempts, "the wait goes on in the same attempt")
		assert.Equal(t, int64(2), toInt(recs["after"].Outputs["n"]))
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not continue after both approvals")
	}
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

// A run that waits in the process (as under runbook serve) is recorded
// waiting while it only waits for an approval, and running again once the
// approval is answered, as a parked run would be.
func TestARunWaitingInProcessIsRecordedWaitingUntilAnswered(t *testing.T) {
	h := realTimeWait(t)
	ctx := context.Background()
	runID, done := executeAsync(t, h, ctx, `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
  - {id: after, uses: approval, with: {message: "really?"}}
`)
	status := func() state.RunStatus {
		r, err := h.store.GetRun(ctx, runID)
		require.NoError(t, err)
		return r.Status
	}
	require.Eventually(t, func() bool { return status() == state.RunWaiting }, 5*time.Second, time.Millisecond)
	require.NoError(t, h.engine.Approve(ctx, runID, "gate", state.Approval{Approved: true, By: "dana"}))
	require.Eventually(t, func() bool {
		rec, err := h.store.GetStep(ctx, runID, "after")
		return err == nil && rec.Status == state.StepWaiting && status() == state.RunWaiting
	}, 5*time.Second, time.Millisecond, "waiting again at the second approval")
	require.NoError(t, h.engine.Approve(ctx, runID, "after", state.Approval{Approved: true, By: "dana"}))
	r := <-done
	require.Equal(t, state.RunSucceeded, r.Status)

	evs, err := h.store.Events(ctx, runID, 0, 0)
	require.NoError(t, err)
	var runEvents []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "run.") {
			runEvents = append(runEvents, ev.Type)
		}
	}
	assert.Equal(t, []string{"run.created", "run.started", "run.waiting", "run.resumed", "run.waiting", "run.resumed", "run.succeeded"}, runEvents)
}

// A step cut short by a cancellation runs again when the run is resumed,
// without the cancellation's error or end while it does.
func TestAResumedStepCarriesNoStaleError(t *testing.T) {
	h := realTimeWait(t)
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
