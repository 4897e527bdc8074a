package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// stored returns run id as s reads it: its record, step records and
// events.
func stored(t *testing.T, s *postgres.Store, id string) (*state.Run, []*state.StepRecord, []state.Event) {
	t.Helper()
	run, err := s.GetRun(ctx, id)
	require.NoError(t, err)
	steps, err := s.Steps(ctx, id)
	require.NoError(t, err)
	evs, err := s.Events(ctx, id, 0, 0)
	require.NoError(t, err)
	return run, steps, evs
}

// writeAtOnce calls write(0) to write(n-1) at the same moment, s's run
// writes held until all n are queued (they meet in the queue and go in
// groups), and returns their errors.
func writeAtOnce(s *postgres.Store, n int, write func(i int) error) []error {
	errs := make([]error, n)
	postgres.HoldRunWrites(s, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			errs[i] = write(i)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// Replica A executes 40 runs and writes their ends at the same moment,
// while 10 of them belong to replica B now (A's lease lapsed for them).
// The writes go in shared transactions; each of B's runs refuses A's
// write with state.ErrFenced naming B, writing nothing, and the 30 runs
// that are A's are written whole: a fenced write fails no other write of
// its group.
func TestAFencedWriteInAGroupFailsOnlyItself(t *testing.T) {
	a, b := replicas(t)
	const runs = 40
	fenceOf := func(id string) context.Context {
		return state.WithFence(ctx, state.Fence{Owner: "A", Run: id})
	}
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
		owner := "A"
		if i%4 == 0 {
			owner = "B" // taken over by B
		}
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: ids[i], Playbook: "pb", Status: state.RunRunning, Owner: owner, CreatedAt: time.Now()}))
	}
	errs := writeAtOnce(a, runs, func(i int) error {
		id := ids[i]
		r := &state.Run{ID: id, Playbook: "pb", Status: state.RunSucceeded, Owner: "A", CreatedAt: time.Now()}
		return a.SaveRunSteps(fenceOf(id), r, []*state.StepRecord{{RunID: id, ID: "note", Status: state.StepSucceeded}},
			state.Event{Type: "step.succeeded", Step: "note"}, state.Event{Type: "run.succeeded"})
	})

	for i, id := range ids {
		got, steps, evs := stored(t, b, id)
		if i%4 == 0 {
			require.ErrorIs(t, errs[i], state.ErrFenced, id)
			var fe *state.FencedError
			require.True(t, errors.As(errs[i], &fe))
			assert.Equal(t, "B", fe.Owner, "the error names the owner")
			assert.Equal(t, state.RunRunning, got.Status, "%s: A wrote nothing to B's run", id)
			assert.Empty(t, steps, id)
			assert.Empty(t, evs, id)
			continue
		}
		require.NoError(t, errs[i], id)
		assert.Equal(t, state.RunSucceeded, got.Status, id)
		require.Len(t, steps, 1, id)
		assert.Equal(t, state.StepSucceeded, steps[0].Status)
		require.Len(t, evs, 2, id)
		assert.Equal(t, []string{"step.succeeded", "run.succeeded"}, []string{evs[0].Type, evs[1].Type}, "%s: its events in order", id)
	}
	groups, _ := a.RunWriteGroups()
	assert.Positive(t, groups, "the writes were grouped: the property held in a group")
}

// Replica A writes the ends of 12 runs at the same moment, while 4 of
// them were recorded cancelled by another process meanwhile. The writes
// go in shared transactions; each cancelled run refuses A's write with
// state.ErrCancelledMeanwhile and keeps nothing of it (no step record,
// no line of output, no event, its key still its own), and the other
// runs are written whole.
func TestAWriteInAGroupToARunCancelledMeanwhileWritesNothing(t *testing.T) {
	a, b := replicas(t)
	const runs = 12
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
		key := "key/" + ids[i]
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: ids[i], Playbook: "pb", Status: state.RunRunning, Owner: "A", ConcurrencyKey: key, CreatedAt: time.Now()}))
		ok, _, err := a.AcquireLock(ctx, state.Lock{Key: key, Owner: ids[i]})
		require.NoError(t, err)
		require.True(t, ok)
		if i%3 == 0 { // cancelled by another process (its API, the CLI)
			r, err := b.GetRun(ctx, ids[i])
			require.NoError(t, err)
			r.Status, r.EndedAt, r.ConcurrencyKey = state.RunCancelled, time.Now(), ""
			require.NoError(t, b.SaveRun(ctx, r, state.Event{Type: "run.cancelled"}))
		}
	}
	errs := writeAtOnce(a, runs, func(i int) error {
		id := ids[i]
		r := &state.Run{ID: id, Playbook: "pb", Status: state.RunSucceeded, Owner: "A", ConcurrencyKey: "key/" + id, CreatedAt: time.Now(), EndedAt: time.Now()}
		printed := []state.OutputLine{{Step: "note", Attempt: 1, Stream: state.StreamStdout, Text: "noted " + id}}
		return a.SaveRunSteps(state.WithFence(ctx, state.Fence{Owner: "A", Run: id}), r,
			[]*state.StepRecord{{RunID: id, ID: "note", Status: state.StepSucceeded, Printed: printed}},
			state.Event{Type: "step.succeeded", Step: "note"}, state.Event{Type: "run.succeeded"})
	})

	locks, err := b.Locks(ctx)
	require.NoError(t, err)
	held := map[string]bool{}
	for _, l := range locks {
		held[l.Key] = true
	}
	for i, id := range ids {
		got, steps, evs := stored(t, b, id)
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		out, err := b.Output(ctx, id, state.OutputFilter{})
		require.NoError(t, err)
		if i%3 == 0 {
			require.ErrorIs(t, errs[i], state.ErrCancelledMeanwhile, id)
			assert.Equal(t, state.RunCancelled, got.Status, id)
			assert.Empty(t, steps, "%s: no step record of the refused write", id)
			assert.Empty(t, out, "%s: no line of the refused write", id)
			assert.Equal(t, []string{"run.cancelled"}, types, id)
			assert.True(t, held["key/"+id], "%s: its key is released by its owner once it has stopped, not by the refused write", id)
			continue
		}
		require.NoError(t, errs[i], id)
		assert.Equal(t, state.RunSucceeded, got.Status, id)
		require.Len(t, steps, 1, id)
		assert.Equal(t, []string{"step.succeeded", "run.succeeded"}, types, id)
		require.Len(t, out, 1, id)
		assert.Equal(t, "noted "+id, out[0].Text)
		assert.False(t, held["key/"+id], "%s: its key freed with its end", id)
	}
	groups, _ := a.RunWriteGroups()
	assert.Positive(t, groups, "the writes were grouped: the property held in a group")
}

// A write alone is slow: another transaction holds its run's row. The 20
// writes of other runs that come meanwhile wait for it and then commit in
// one group, as they would behind a group, instead of going alone, a
// transaction each.
func TestWritesThatComeWhileAWriteAloneCommitsWaitAndGoTogether(t *testing.T) {
	dsn := pgtest.DB(t)
	a := open(t, dsn, postgres.Options{})
	const others = 20
	ids := []string{"slow"}
	for i := range others {
		ids = append(ids, fmt.Sprintf("r%02d", i))
	}
	for _, id := range ids {
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", Status: state.RunRunning, Owner: "A", CreatedAt: time.Now()}))
	}
	write := func(id string) error {
		r := &state.Run{ID: id, Playbook: "pb", Status: state.RunSucceeded, Owner: "A", CreatedAt: time.Now()}
		return a.SaveRunSteps(state.WithFence(ctx, state.Fence{Owner: "A", Run: id}), r,
			[]*state.StepRecord{{RunID: id, ID: "note", Status: state.StepSucceeded}}, state.Event{Type: "run.succeeded"})
	}
	holder := connect(t, dsn)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT FROM runbook_runs WHERE id = 'slow' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	var done sync.WaitGroup
	errs := make([]error, len(ids))
	done.Go(func() { errs[0] = write("slow") })
	watcher := connect(t, dsn)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE '%is owned by%'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 5*time.Millisecond, "the write of slow waits for the row")
	for i, id := range ids[1:] {
		done.Go(func() { errs[i+1] = write(id) })
	}
	require.Eventually(t, func() bool { return postgres.WaitingRunWrites(a) == others }, 10*time.Second, 5*time.Millisecond,
		"the other writes wait behind the write alone")
	require.NoError(t, tx.Commit(ctx))
	done.Wait()
	for i, err := range errs {
		require.NoError(t, err, ids[i])
	}
	groups, writes := a.RunWriteGroups()
	assert.Equal(t, int64(1), groups, "one group")
	assert.Equal(t, int64(others), writes, "of every other write")
}

// A replica claims runs side by side (as it does the runs of a webhook
// delivery group): each claim learns its own outcome — the runs another
// live replica owns stay its own — and the engine's first read of a
// claimed run's steps gets its records, as of the claim. A write of the
// run after the claim is not missed by a later read.
func TestClaimsSideBySideAnswerEachRunAndKeepItsSteps(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.KeepReplica(ctx, "A", state.ReplicaServe, time.Minute))
	require.NoError(t, b.KeepReplica(ctx, "B", state.ReplicaServe, time.Minute))
	const runs = 30
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
		owner := ""
		if i%3 == 0 {
			owner = "B" // a live replica's
		}
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: ids[i], Playbook: "pb", Status: state.RunPending, Owner: owner}))
		require.NoError(t, a.SaveStep(ctx, &state.StepRecord{RunID: ids[i], ID: "first", Status: state.StepSucceeded}))
	}
	claimed := make([]bool, runs)
	postgres.HoldClaims(a, runs) // the claims meet in the queue
	var start, done sync.WaitGroup
	start.Add(1)
	for i, id := range ids {
		done.Go(func() {
			start.Wait()
			ok, err := a.ClaimRun(ctx, id, "A", false)
			assert.NoError(t, err)
			claimed[i] = ok
		})
	}
	start.Done()
	done.Wait()
	for i, id := range ids {
		byB, err := b.ClaimRun(ctx, id, "B", false) // true for B's own runs only
		require.NoError(t, err)
		if i%3 == 0 {
			assert.False(t, claimed[i], "%s is B's", id)
			assert.True(t, byB, "%s is still B's", id)
			continue
		}
		assert.True(t, claimed[i], id)
		assert.False(t, byB, "%s is A's now", id)
	}
	// The engine's first read of a claimed run, and a read after a write.
	steps, err := a.Steps(ctx, ids[1])
	require.NoError(t, err)
	require.Len(t, steps, 1)
	assert.Equal(t, "first", steps[0].ID)
	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: ids[2]})
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: ids[2], ID: "second", Status: state.StepRunning}))
	steps, err = a.Steps(ctx, ids[2])
	require.NoError(t, err)
	require.Len(t, steps, 2, "the write after the claim is read")
	assert.Equal(t, []string{"first", "second"}, []string{steps[0].ID, steps[1].ID})
	groups, _ := a.ClaimGroups()
	assert.Positive(t, groups, "the claims were sent together")
}

// A run created as its owner's (runbook run: engine.StartRequest.Own)
// has no step records but its owner's: the engine's first read of them
// takes no connection (none is free here), and a read after the owner's
// write asks the database. Its status is not kept as a claim's is:
// another replica may cancel it before it executes.
func TestARunCreatedAsItsOwnersIsReadWithoutAConnection(t *testing.T) {
	a := open(t, pgtest.DB(t), postgres.Options{})
	require.NoError(t, a.KeepReplica(ctx, "A", state.ReplicaRun, time.Minute))
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "own", Playbook: "pb", Status: state.RunPending, Owner: "A", CreatedAt: time.Now()}))
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "queued", Playbook: "pb", Status: state.RunPending, CreatedAt: time.Now()}))
	_, ok := a.ClaimedStatus("own")
	assert.False(t, ok, "not read: not kept")
	t.Run("every connection busy", func(t *testing.T) {
		postgres.HoldPool(t, a)
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		steps, err := a.Steps(short, "own")
		require.NoError(t, err)
		assert.Empty(t, steps)
		_, err = a.Steps(short, "queued")
		assert.Error(t, err, "a run created with no owner is read from the database")
	})
	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "own"})
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: "own", ID: "first", Status: state.StepRunning}))
	steps, err := a.Steps(ctx, "own")
	require.NoError(t, err)
	require.Len(t, steps, 1, "the owner's write is read")
	assert.Equal(t, "first", steps[0].ID)
}

// BenchmarkGroupedStepWrites writes the ends of runs from N writers at
// once, each its own run with its fence (as executing runs do), on
// PostgreSQL with synchronous_commit on: the writes share transactions
// (commitWrites). It reports the mean writes per group transaction.
func BenchmarkGroupedStepWrites(b *testing.B) {
	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := open(b, pgtest.DB(b), postgres.Options{})
			now := time.Now()
			ids := make([]string, writers)
			for i := range ids {
				ids[i] = fmt.Sprintf("r%d", i)
				r := benchRun(ids[i])
				r.Owner = "replica/1"
				if err := s.CreateRun(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			g0, w0 := s.RunWriteGroups()
			var mu sync.Mutex
			n := 0
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Go(func() {
					wctx := state.WithFence(context.Background(), state.Fence{Owner: "replica/1", Run: id})
					for i := 0; ; i++ {
						mu.Lock()
						if n >= b.N {
							mu.Unlock()
							return
						}
						n++
						mu.Unlock()
						step := fmt.Sprintf("step-%d", i)
						rec := &state.StepRecord{RunID: id, ID: step, Status: state.StepSucceeded, Attempts: 1, StartedAt: now, EndedAt: now}
						if err := s.SaveStep(wctx, rec, state.Event{Time: now, Type: "step.succeeded", Step: step, Attempt: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			g, w := s.RunWriteGroups()
			if g > g0 {
				b.ReportMetric(float64(w-w0)/float64(g-g0), "writes/group")
			}
		})
	}
}

// A claim reads the claimed run's status (state.ClaimReadsStatus): the
// runner's check that a run it has just claimed was not cancelled while
// it waited for a slot needs no read of its own. A run of this replica's
// cancelled on another replica is claimed (to end it) and said cancelled;
// once this store writes the run, nothing is kept.
func TestAClaimKeepsTheClaimedRunsStatus(t *testing.T) {
	a, b := replicas(t)
	var _ state.ClaimReadsStatus = a
	require.NoError(t, a.KeepReplica(ctx, "A", state.ReplicaServe, time.Minute))
	for _, id := range []string{"pending", "cancelled"} {
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", Status: state.RunPending, Owner: "A", CreatedAt: time.Now()}))
	}
	cancelled, err := b.GetRun(ctx, "cancelled")
	require.NoError(t, err)
	cancelled.Status, cancelled.EndedAt = state.RunCancelled, time.Now()
	require.NoError(t, b.SaveRun(ctx, cancelled, state.Event{Type: "run.cancelled"})) // as another replica's API does

	_, ok := a.ClaimedStatus("pending")
	assert.False(t, ok, "not claimed yet")
	for id, want := range map[string]state.RunStatus{"pending": state.RunPending, "cancelled": state.RunCancelled} {
		claimed, err := a.ClaimRun(ctx, id, "A", false)
		require.NoError(t, err)
		require.True(t, claimed, id)
		st, ok := a.ClaimedStatus(id)
		require.True(t, ok, id)
		assert.Equal(t, want, st, id)
	}
	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "pending"})
	r, err := a.GetRun(ctx, "pending")
	require.NoError(t, err)
	r.Status = state.RunRunning
	require.NoError(t, a.SaveRun(asA, r, state.Event{Type: "run.started"}))
	_, ok = a.ClaimedStatus("pending")
	assert.False(t, ok, "a write through this store drops what the claim read")
}
