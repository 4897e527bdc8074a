package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// slowStore is the real store taking delay for every run and step write,
// as a store whose committer is behind a queue of large commits does. A
// write whose context ends first is abandoned with the context's error.
type slowStore struct {
	state.Store
	delay time.Duration
}

func (s *slowStore) wait(ctx context.Context) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowStore) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, evs...)
}

func (s *slowStore) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.SaveRunSteps(ctx, r, recs, evs...)
}

func (s *slowStore) SaveSteps(ctx context.Context, recs []*state.StepRecord, evs ...state.Event) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.SaveSteps(ctx, recs, evs...)
}

func (s *slowStore) AppendEvents(ctx context.Context, runID string, evs ...state.Event) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.AppendEvents(ctx, runID, evs...)
}

const keyedBook = `
version: 1
name: keyed
concurrency: {key: "k", on_busy: skip}
steps:
  - {id: a, uses: log, with: {message: one}}
  - {id: b, uses: log, with: {message: two}}
`

// TestAStoreSlowerThanStateWritesDelaysARunButNeverDropsIt: every write
// takes longer than StateWrites, the bound for writes after cancellation.
// A live run's writes wait for the store: the run ends succeeded with
// every step recorded and its concurrency key free (a timer used to
// abandon them, leaving acknowledged runs pending).
func TestAStoreSlowerThanStateWritesDelaysARunButNeverDropsIt(t *testing.T) {
	var slow *slowStore
	h := newHarness(t, func(o *engine.Options) {
		slow = &slowStore{Store: o.Store, delay: 30 * time.Millisecond}
		o.Store, o.Limits.StateWrites = slow, 5*time.Millisecond
	})
	r, err := h.run(keyedBook, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	stored, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, stored.Status, "the final record was written")
	recs := h.steps(r.ID)
	require.Len(t, recs, 2)
	for id, rec := range recs {
		assert.Equal(t, state.StepSucceeded, rec.Status, "step %s", id)
	}
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	assert.Empty(t, locks)
}

// TestACancelledRunsFinalWriteIsBoundedByStateWrites: once a run is
// cancelled, a write that the store holds is given up after StateWrites
// instead of holding the caller for ever.
func TestACancelledRunsFinalWriteIsBoundedByStateWrites(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) {
		o.Store, o.Limits.StateWrites = &slowStore{Store: o.Store, delay: time.Hour}, 20*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.engine.Run(ctx, h.load(keyedBook), engine.StartRequest{})
		done <- err
	}()
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled run's writes were not bounded")
	}
}

// failingRelease is the real store refusing the first releases of a key.
type failingRelease struct {
	state.Store
	mu    sync.Mutex
	fails int
}

func (s *failingRelease) ReleaseLock(ctx context.Context, key, owner string) error {
	s.mu.Lock()
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return errors.New("disk full")
	}
	return s.Store.ReleaseLock(ctx, key, owner)
}

// TestAConcurrencyKeyWhoseReleaseFailsIsReleasedLater: the release of a
// finished run's key fails twice; it is tried again until it is free, and
// the next run with the key is not skipped.
func TestAConcurrencyKeyWhoseReleaseFailsIsReleasedLater(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) {
		o.Store = &failingRelease{Store: o.Store, fails: 2}
	})
	r, err := h.run(keyedBook, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	require.Eventually(t, func() bool {
		locks, err := h.store.Locks(context.Background())
		return err == nil && len(locks) == 0
	}, 5*time.Second, 10*time.Millisecond, "the key is released in the end")
	again, err := h.run(keyedBook, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, again.Status, "not skipped: the key is free")
}

// takenOver is the real store whose releases fail, and whose key, at the
// first failed release, passes to another run (as ReleaseStaleLocks at a
// restart and a new run would do).
type takenOver struct {
	state.Store
	mu    sync.Mutex
	calls int
}

func (s *takenOver) ReleaseLock(ctx context.Context, key, owner string) error {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		if err := s.Store.ReleaseLock(ctx, key, owner); err != nil {
			return err
		}
		if _, _, err := s.Store.AcquireLock(ctx, state.Lock{Key: key, Owner: "other-run"}); err != nil {
			return err
		}
	}
	return errors.New("disk full")
}

func (s *takenOver) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestAKeyTakenByAnotherRunIsNotReleasedAgain: once the key a run failed
// to release belongs to another run, the retries stop and the other
// run's key stays held.
func TestAKeyTakenByAnotherRunIsNotReleasedAgain(t *testing.T) {
	var st *takenOver
	h := newHarness(t, func(o *engine.Options) {
		st = &takenOver{Store: o.Store}
		o.Store = st
	})
	r, err := h.run(keyedBook, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	require.Eventually(t, func() bool { return st.count() >= 2 }, 5*time.Second, 5*time.Millisecond, "the failed release is tried again")
	time.Sleep(500 * time.Millisecond) // a further retry would come within 200 ms
	assert.Equal(t, 2, st.count(), "no retry once the key is another run's")
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Equal(t, "other-run", locks[0].Owner)
}
