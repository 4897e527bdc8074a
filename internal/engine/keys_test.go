package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
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

// releaseCounter counts the ReleaseLock calls made to the PostgreSQL
// store it wraps (whose run ends free their keys: state.EndFreesKey).
type releaseCounter struct {
	*postgres.Store
	releases atomic.Int64
}

func (c *releaseCounter) ReleaseLock(ctx context.Context, key, owner string) error {
	c.releases.Add(1)
	return c.Store.ReleaseLock(ctx, key, owner)
}

// On PostgreSQL a keyed run that ends succeeded or failed has its key
// freed by the write of its end: the engine makes no release of its own,
// one transaction a run less, and still tells its host the key is free
// (Released), so the runs parked on it go on.
func TestAKeyedRunsEndFreesItsKeyWithoutARelease(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	st := &releaseCounter{Store: pg}
	h := newHarness(t, func(o *engine.Options) { o.Store = st })

	r, err := h.run(keyedSrc, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	r, err = h.run(`
version: 1
name: keyed-failing
concurrency: {key: the-key, on_busy: queue}
steps:
  - {id: one, uses: fail, with: {message: no}}
`, nil)
	require.ErrorContains(t, err, "step one: no")
	assert.Equal(t, state.RunFailed, r.Status)

	locks, err := st.Locks(ctx)
	require.NoError(t, err)
	assert.Empty(t, locks, "freed by the runs' ends")
	assert.Zero(t, st.releases.Load(), "no release of its own")
	assert.Equal(t, []string{"the-key", "the-key"}, h.released())
}

// Prepare names the run's concurrency key in its record when the run's
// inputs give it, for the commit to take it (state.DeliveryUnit): not
// when the key uses what the run sees only once it executes (its
// trigger, the clock), nor when runs are parked on it in the host and
// the run would queue behind them. A secret input is masked in it as
// the executing run masks it.
func TestPrepareNamesTheKeyTheRunsInputsGive(t *testing.T) {
	h := newHarness(t)
	prepare := func(key, onBusy string) string {
		t.Helper()
		pb := h.load(`
version: 1
name: keyed
inputs:
  n: {type: string}
  pin: {type: string, secret: true, default: "4242-secret"}
concurrency: {key: '` + key + `', on_busy: ` + onBusy + `}
steps:
  - {id: one, uses: set, with: {ok: true}}
`)
		r, _, err := h.engine.Prepare(pb, engine.StartRequest{Inputs: map[string]any{"n": "7"}, Trigger: map[string]any{"type": "webhook", "x": "y"}})
		require.NoError(t, err)
		return r.ConcurrencyKey
	}
	assert.Equal(t, "sms-7", prepare("sms-${{ inputs.n }}", "queue"))
	assert.Equal(t, "fixed", prepare("fixed", "queue"))
	assert.Equal(t, "pin-***", prepare("pin-${{ inputs.pin }}", "skip"))
	assert.Empty(t, prepare("t-${{ trigger.x }}", "queue"), "the trigger is the run's once it executes")
	assert.Empty(t, prepare("c-${{ inputs.n }}-${{ now() }}", "queue"), "the clock is read when the run takes its key")

	h.engine.SetKeyQueued("sms-7", true)
	assert.Empty(t, prepare("sms-${{ inputs.n }}", "queue"), "runs are parked on it here: the run queues behind them")
	assert.Equal(t, "sms-7", prepare("sms-${{ inputs.n }}", "cancel_running"))
}

// A run whose record names a key it no longer takes when it executes
// (a key that reads the run's status, or the clock before the run was
// resumed) lets that key go: it does not keep a key it may hold.
func TestARunLetsGoAKeyItWasRecordedWithAndNoLongerTakes(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pb := h.load(keyedSrc)
	r, ev, err := h.engine.Prepare(pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Equal(t, "the-key", r.ConcurrencyKey)
	r.ConcurrencyKey = "an-older-key" // as if its inputs gave another then
	require.NoError(t, h.store.CreateRun(ctx, r, ev))
	ok, _, err := h.store.AcquireLock(ctx, state.Lock{Key: "an-older-key", Owner: r.ID})
	require.NoError(t, err)
	require.True(t, ok)

	r, err = h.engine.Execute(ctx, pb, r)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, "the-key", r.ConcurrencyKey)
	locks, err := h.store.Locks(ctx)
	require.NoError(t, err)
	assert.Empty(t, locks, "neither the key it took nor the one it was recorded with is held")
}
