package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// unavailableStore is the real store whose step and run writes and key
// takes fail as a database that restarts makes them fail (wrapping
// state.ErrUnavailable): the next fails ones, or every one while fails
// is negative. The real faults (a terminated connection, a restarted
// server, a full disk) are injected by the server's and the CLI's tests;
// this one holds the retry loop's bounds.
type unavailableStore struct {
	state.Store
	mu     sync.Mutex
	fails  int
	failed int
	owner  string // not empty: the run is this other process's now (a fenced write is refused)
	// step, when set, holds the failures back until the write of that
	// step's completion (then every write fails, or only those of the
	// step while stepOnly).
	step     string
	stepOnly bool
}

var errDown = fmt.Errorf("connect: connection refused: %w", state.ErrUnavailable)

func (s *unavailableStore) down(recs ...*state.StepRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step != "" {
		if !slices.ContainsFunc(recs, func(r *state.StepRecord) bool { return r.ID == s.step && r.Status.Done() }) {
			return nil
		}
		if !s.stepOnly {
			s.step = ""
		}
	}
	if s.owner != "" {
		return &state.FencedError{Run: "lost", Owner: s.owner}
	}
	if s.fails == 0 {
		return nil
	}
	if s.fails > 0 {
		s.fails--
	}
	s.failed++
	return errDown
}

func (s *unavailableStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *unavailableStore) SaveSteps(ctx context.Context, recs []*state.StepRecord, evs ...state.Event) error {
	if err := s.down(recs...); err != nil {
		return err
	}
	return s.Store.SaveSteps(ctx, recs, evs...)
}

func (s *unavailableStore) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	if err := s.down(recs...); err != nil {
		return err
	}
	return s.Store.SaveRunSteps(ctx, r, recs, evs...)
}

func (s *unavailableStore) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	if err := s.down(); err != nil {
		return err
	}
	return s.Store.SaveRun(ctx, r, evs...)
}

func (s *unavailableStore) AcquireLock(ctx context.Context, l state.Lock) (bool, *state.Lock, error) {
	if err := s.down(); err != nil {
		return false, nil, err
	}
	return s.Store.AcquireLock(ctx, l)
}

// keyedShell is a playbook with a concurrency key whose two shell steps
// each append a line to a file per execution.
func keyedShell(file string) string {
	return `
version: 1
name: keyed-shell
concurrency: {key: "k", on_busy: queue}
steps:
  - {id: a, uses: shell, with: {command: "echo a >> ` + file + `"}}
  - {id: b, uses: shell, with: {command: "echo b >> ` + file + `"}}
`
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(data))
}

// A store that is unavailable for a while delays the run's key, its
// steps' completions and its end, each tried again until made (and
// logged with the run): the run succeeds, each step executed once, its
// key released at the end.
func TestAStoreUnavailableForAWhileDelaysTheRunAndRepeatsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lines")
	var logs syncBuffer
	st := &unavailableStore{fails: 6}
	h := newHarness(t, func(o *engine.Options) {
		st.Store = o.Store
		o.Store, o.Logger = st, slog.New(slog.NewTextHandler(&logs, nil))
	})
	r, err := h.engine.Run(context.Background(), h.load(keyedShell(file)), engine.StartRequest{ID: "blinked"})
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 6, st.count(), "every failure was tried again")
	assert.Equal(t, []string{"a", "b"}, lines(t, file), "each step executed once")
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepSucceeded, recs["a"].Status)
	assert.Equal(t, state.StepSucceeded, recs["b"].Status)
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	assert.Empty(t, locks, "the key is released once the run's end is recorded")
	assert.Contains(t, logs.String(), "state store operation failed; trying again")
	assert.Contains(t, logs.String(), "run_id=blinked")
	assert.Contains(t, logs.String(), "connection refused")
}

// retrying starts run id of keyedShell in the background, on a store that
// goes away as step a ends (with fenced, as replica-1 whose writes are
// fenced), and returns once step a's completion has been tried three
// times. The run's outcome arrives on the channel.
func retrying(t *testing.T, host context.Context, id string, fenced bool) (*harness, *unavailableStore, string, <-chan ranRun) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "lines")
	st := &unavailableStore{fails: -1, step: "a"}
	h := newHarness(t, func(o *engine.Options) {
		st.Store = o.Store
		o.Store = st
		if fenced {
			o.Host.Fence, o.Process = true, "replica-1"
		}
	})
	done := make(chan ranRun, 1)
	go func() {
		r, err := h.engine.Run(host, h.load(keyedShell(file)), engine.StartRequest{ID: id})
		done <- ranRun{r, err}
	}()
	require.Eventually(t, func() bool { return st.count() >= 3 }, 10*time.Second, 5*time.Millisecond, "step a's completion is tried again")
	return h, st, file, done
}

// ranRun is what Run returned.
type ranRun struct {
	run *state.Run
	err error
}

// The host stopping (its context ends: a shutdown) ends the retries: the
// run returns unfinished, not failed, still holding its key, and its
// finished step is not executed again.
func TestTheHostStoppingEndsTheRetriesAndTheRunKeepsItsKey(t *testing.T) {
	host, stop := context.WithCancelCause(context.Background())
	h, _, file, done := retrying(t, host, "stopped", false)
	stop(engine.ErrSuspend)
	var r *state.Run
	select {
	case got := <-done:
		require.Error(t, got.err)
		assert.NotErrorIs(t, got.err, engine.ErrNotWritten, "a shutdown is not the run's failure")
		r = got.run
	case <-time.After(30 * time.Second):
		t.Fatal("the retries outlived the host")
	}
	assert.False(t, r.Status.Done(), "the run is unfinished, not %s", r.Status)
	stored, err := h.store.GetRun(context.Background(), "stopped")
	require.NoError(t, err)
	assert.False(t, stored.Status.Done(), "recorded unfinished, not %s", stored.Status)
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	require.Len(t, locks, 1, "the unfinished run keeps its key")
	assert.Equal(t, "stopped", locks[0].Owner)
	assert.Equal(t, []string{"a"}, lines(t, file), "step b never started; step a not repeated")
}

// Losing the run (another replica took it over: the store refuses its
// fenced write) ends the retries at once: the run stops fenced, writes
// nothing more, and keeps its key for the replica that took it.
func TestLosingTheRunEndsTheRetriesAtOnce(t *testing.T) {
	h, st, file, done := retrying(t, context.Background(), "lost", true)
	st.mu.Lock()
	st.owner, st.step = "replica-2", ""
	st.mu.Unlock()
	select {
	case got := <-done:
		require.ErrorIs(t, got.err, state.ErrFenced)
	case <-time.After(5 * time.Second):
		t.Fatal("the retries went on after the run was lost")
	}
	stored, err := h.store.GetRun(context.Background(), "lost")
	require.NoError(t, err)
	assert.False(t, stored.Status.Done(), "recorded unfinished, not %s", stored.Status)
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	require.Len(t, locks, 1, "the lost run keeps its key")
	assert.Equal(t, []string{"a"}, lines(t, file))
}

// A lapse of the process's lease (Fence) while a step's completion is
// being written stops the run from starting anything more, but not that
// write: it is fenced, so the store takes it while the process still owns
// the run, and the step is recorded finished. Whoever goes on with the run
// does not execute it again.
func TestALeaseLapseDuringACompletionWriteStillRecordsTheStep(t *testing.T) {
	h, st, file, done := retrying(t, context.Background(), "lapsed", true)
	h.engine.Fence(errors.New("lease lapsed"))
	time.Sleep(200 * time.Millisecond)
	st.mu.Lock()
	st.fails, st.step = 0, "" // the database answers again
	st.mu.Unlock()
	select {
	case got := <-done:
		require.ErrorIs(t, got.err, state.ErrFenced, "the run stops here: its lease lapsed")
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop")
	}
	rec := h.steps("lapsed")["a"]
	require.NotNil(t, rec, "step a's completion was written")
	assert.Equal(t, state.StepSucceeded, rec.Status, "step a's completion was written")
	assert.Equal(t, []string{"a"}, lines(t, file), "step b did not start after the lapse")

	h.engine.Unfence()
	r, err := h.engine.Resume(context.Background(), "lapsed")
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, []string{"a", "b"}, lines(t, file), "the resume did not execute step a again")
}

// approvalDown is the real store whose approval answers fail as a
// restarting database makes them fail, the next fails ones.
type approvalDown struct {
	state.Store
	mu    sync.Mutex
	fails int
}

func (s *approvalDown) AnswerApproval(ctx context.Context, runID, step string, decide state.Decide) error {
	s.mu.Lock()
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return errDown
	}
	return s.Store.AnswerApproval(ctx, runID, step, decide)
}

// The timeout of an approval is recorded as an answer is; a store
// unavailable at that moment delays it, and the run goes on as the
// timeout says instead of failing.
func TestAnApprovalTimeoutRecordedWhileTheStoreIsUnavailableIsTriedAgain(t *testing.T) {
	st := &approvalDown{fails: 3}
	h := newHarness(t, func(o *engine.Options) { st.Store = o.Store; o.Store = st })
	pb := h.load(`
version: 1
name: timed
steps:
  - {id: gate, uses: approval, with: {message: "go?", timeout: 1m, on_timeout: approve}}
  - {id: after, uses: set, with: {done: true}}
`)
	r, err := h.engine.Run(context.Background(), pb, engine.StartRequest{ID: "timed"})
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	require.NoError(t, h.clock.Sleep(context.Background(), 2*time.Minute))
	r, err = h.engine.Resume(context.Background(), "timed")
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.LessOrEqual(t, st.fails, 0, "the timeout's write was tried again")
	assert.Equal(t, state.StepSucceeded, h.steps("timed")["after"].Status)
}
