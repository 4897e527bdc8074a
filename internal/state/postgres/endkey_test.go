package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// A run's write of a status that frees its key frees the key it holds in
// the same transaction, grouped or alone, and tells the other replica a
// waiter asked for it. A run written cancelled keeps its key (its owner
// releases it once stopped), and so does a write refused because another
// process recorded the run cancelled meanwhile.
func TestARunsEndFreesItsKeyInTheSameWrite(t *testing.T) {
	a, b := replicas(t)
	require.True(t, a.EndFreesKey())
	notices := make(chan state.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Listen(lctx, func(n state.Notice) { notices <- n }) }()
	require.Equal(t, state.Notice{Kind: state.NoticeListening}, next(t, notices))

	keyed := func(id, key string) *state.Run {
		t.Helper()
		r := &state.Run{ID: id, Playbook: "pb", Status: state.RunRunning, Owner: "A", ConcurrencyKey: key, CreatedAt: time.Now()}
		require.NoError(t, a.CreateRun(ctx, r))
		ok, _, err := a.AcquireLock(ctx, state.Lock{Key: key, Owner: id})
		require.NoError(t, err)
		require.True(t, ok)
		return r
	}
	held := func() []string {
		t.Helper()
		locks, err := b.Locks(ctx)
		require.NoError(t, err)
		var keys []string
		for _, l := range locks {
			keys = append(keys, l.Key)
		}
		return keys
	}
	fenced := func(id string) context.Context { return state.WithFence(ctx, state.Fence{Owner: "A", Run: id}) }

	ok := keyed("ok", "k-ok")
	_, _, err := b.AcquireLock(ctx, state.Lock{Key: "k-ok", Owner: "queued"}) // a waiter
	require.NoError(t, err)
	ok.Status, ok.EndedAt = state.RunSucceeded, time.Now()
	require.NoError(t, a.SaveRunSteps(fenced("ok"), ok, []*state.StepRecord{{RunID: "ok", ID: "s", Status: state.StepSucceeded}},
		state.Event{Type: "run.succeeded"}))
	assert.Equal(t, state.Notice{Kind: state.NoticeKeyFreed, Key: "k-ok"}, next(t, notices))

	failed := keyed("failed", "k-failed")
	failed.Status, failed.EndedAt = state.RunFailed, time.Now()
	require.NoError(t, a.SaveRun(ctx, failed, state.Event{Type: "run.failed"})) // alone, unfenced

	cancelled := keyed("cancelled", "k-cancelled")
	cancelled.Status, cancelled.EndedAt = state.RunCancelled, time.Now()
	require.NoError(t, a.SaveRun(fenced("cancelled"), cancelled, state.Event{Type: "run.cancelled"}))

	refused := keyed("refused", "k-refused")
	byB, err := b.GetRun(ctx, "refused")
	require.NoError(t, err)
	byB.Status, byB.EndedAt = state.RunCancelled, time.Now()
	require.NoError(t, b.SaveRun(ctx, byB, state.Event{Type: "run.cancelled"}))
	refused.Status, refused.EndedAt = state.RunSucceeded, time.Now()
	require.ErrorIs(t, a.SaveRun(fenced("refused"), refused, state.Event{Type: "run.succeeded"}), state.ErrCancelledMeanwhile)

	assert.Equal(t, []string{"k-cancelled", "k-refused"}, held())
}
