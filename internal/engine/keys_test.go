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

// released returns the keys the engine released so far (Released).
func (h *harness) released() []string {
	var keys []string
	for {
		select {
		case key := <-h.engine.Released():
			keys = append(keys, key)
		default:
			return keys
		}
	}
}

const keyedSrc = `
version: 1
name: keyed
concurrency: {key: the-key, on_busy: queue}
steps:
  - {id: one, uses: set, with: {ok: true}}
`

// A run whose key is held parks: it is saved waiting, queued on the key,
// without holding it, and its call returns. Executed again once the key
// is free, it takes the key and runs; its release is sent to the host
// (Released).
func TestARunWhoseKeyIsHeldParksQueuedOnIt(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Host.ParkAfter = 2 * time.Second })
	ctx := context.Background()
	ok, _, err := h.store.AcquireLock(ctx, state.Lock{Key: "the-key", Owner: "holder"})
	require.NoError(t, err)
	require.True(t, ok)

	r, err := h.run(keyedSrc, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	got, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, got.Status)
	assert.Equal(t, "the-key", got.QueuedOnKey)
	assert.Len(t, h.stored(r.ID, "run.queued"), 1)

	// Woken while the key is still held: parked again, without a write.
	n := len(h.stored(r.ID, ""))
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	assert.Len(t, h.stored(r.ID, ""), n, "no event, no write")

	require.NoError(t, h.store.ReleaseLock(ctx, "the-key", "holder"))
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	got, err = h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Empty(t, got.QueuedOnKey)
	locks, err := h.store.Locks(ctx)
	require.NoError(t, err)
	assert.Empty(t, locks)
	assert.Equal(t, []string{"the-key"}, h.released())
}

// A new run with on_busy: queue whose key has runs parked on it in the
// host (SetKeyQueued) parks behind them, even though the key is free:
// they get it first.
func TestANewRunQueuesBehindTheRunsParkedOnItsKey(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Host.ParkAfter = 2 * time.Second })
	h.engine.SetKeyQueued("the-key", true)
	r, err := h.run(keyedSrc, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	assert.Equal(t, "the-key", r.QueuedOnKey)
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	assert.Empty(t, locks, "the free key was not taken")
}
