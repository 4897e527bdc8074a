package postgres_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// replicas opens two stores on one fresh database, as two "runbook serve"
// processes would.
func replicas(t *testing.T) (a, b *postgres.Store) {
	t.Helper()
	dsn := pgtest.DB(t)
	return open(t, dsn, postgres.Options{}), open(t, dsn, postgres.Options{})
}

func TestAReplicaSeesTheOthersWrites(t *testing.T) {
	a, b := replicas(t)
	r := &state.Run{ID: "r1", Playbook: "upgrade", Status: state.RunRunning, Hash: "h1", Snapshot: []byte("name: upgrade\n"),
		Trigger: map[string]any{"type": "schedule"}, CreatedAt: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}
	require.NoError(t, a.CreateRun(ctx, r, state.Event{Type: "run.created"}))
	require.NoError(t, a.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepSucceeded}, state.Event{Type: "step.succeeded", Step: "a"}))
	require.NoError(t, a.PutCursor(ctx, "notice/kr1", []byte("c1")))

	got, err := b.GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, r, got)
	steps, err := b.Steps(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, steps, 1)
	assert.Equal(t, state.StepSucceeded, steps[0].Status)
	runs, err := b.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunRunning}})
	require.NoError(t, err)
	assert.Len(t, runs, 1)
	cur, err := b.GetCursor(ctx, "notice/kr1")
	require.NoError(t, err)
	assert.Equal(t, "c1", string(cur))

	// The other way round, and the event numbers carry on.
	require.NoError(t, b.AppendEvents(ctx, "r1", state.Event{Type: "log", Message: "from b"}))
	evs, err := a.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	var seqs []uint64
	for _, ev := range evs {
		seqs = append(seqs, ev.Seq)
	}
	assert.Equal(t, []uint64{1, 2, 3}, seqs)
	assert.Equal(t, "from b", evs[2].Message)
}

func TestEventsWrittenFromTwoReplicasAtOnceAreNumberedWithoutGaps(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*each)
	for i, s := range []*postgres.Store{a, b} {
		for w := range writers {
			wg.Go(func() {
				for n := range each {
					id := fmt.Sprintf("s%d-w%d-%d", i, w, n)
					errs <- s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: id, Status: state.StepSucceeded},
						state.Event{Type: "step.started", Step: id}, state.Event{Type: "step.succeeded", Step: id})
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	evs, err := b.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2*2*writers*each)
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq)
		if ev.Type == "step.succeeded" {
			// A call's events are consecutive: no other writer's between.
			assert.Equal(t, "step.started", evs[i-1].Type)
			assert.Equal(t, ev.Step, evs[i-1].Step)
		}
	}
	steps, err := a.Steps(ctx, "r1")
	require.NoError(t, err)
	assert.Len(t, steps, 2*writers*each)
}

// hookDelivery is a webhook delivery (its key the hooksId) with one unit
// per hook, each claiming the hook's key, as the webhook intake commits
// them.
func hookDelivery(deliveryKey, runPrefix string, hooks ...string) state.Delivery {
	d := state.Delivery{Key: deliveryKey, TTL: time.Hour, Done: func(created []string, _ [][]byte) []byte {
		return []byte(strings.Join(created, ","))
	}}
	for _, h := range hooks {
		d.Units = append(d.Units, state.DeliveryUnit{
			Claim: "hook/" + h, ClaimValue: []byte(runPrefix + h),
			Run:    &state.Run{ID: runPrefix + h, Playbook: "pb", Trigger: map[string]any{"type": "webhook", "key": h}},
			Events: []state.Event{{Type: "run.created"}},
		})
	}
	return d
}

// Two replicas receive redeliveries of the same hooks under different
// hooksIds, in a different order, at the same moment: each hook starts
// exactly one run, and the replica that lost a hook is told which run has
// it.
func TestRacingDeliveriesFromTwoReplicasNeverClaimAHookTwice(t *testing.T) {
	a, b := replicas(t)
	const rounds = 30
	for round := range rounds {
		h1, h2 := fmt.Sprintf("h%d-1", round), fmt.Sprintf("h%d-2", round)
		var resA, resB state.DeliveryResult
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			resA, errA = a.CommitDelivery(ctx, hookDelivery(fmt.Sprint("da", round), "a-", h1, h2))
		})
		wg.Go(func() {
			<-start
			resB, errB = b.CommitDelivery(ctx, hookDelivery(fmt.Sprint("db", round), "b-", h2, h1))
		})
		close(start)
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)

		for _, h := range []string{h1, h2} {
			runs := 0
			for _, prefix := range []string{"a-", "b-"} {
				if _, err := a.GetRun(ctx, prefix+h); err == nil {
					runs++
				}
			}
			assert.Equal(t, 1, runs, "round %d: runs for hook %s", round, h)
		}
		assert.Equal(t, 2, len(resA.Created)+len(resB.Created), "round %d: %+v %+v", round, resA, resB)
		assert.Equal(t, 2, len(resA.Earlier)+len(resB.Earlier), "round %d: each skipped unit learns of the other run", round)
		for _, v := range append(resA.Earlier, resB.Earlier...) {
			_, err := a.GetRun(ctx, string(v))
			assert.NoError(t, err, "round %d: Earlier names run %q", round, v)
		}
	}
	// Claims are locked in one order: the deliveries waited for each
	// other, none deadlocked and was run again.
	assert.Zero(t, postgres.Retries(a)+postgres.Retries(b), "transactions run again")
}

// The same delivery (one hooksId) reaching both replicas at once starts
// its runs once: one replica commits it, the other finds it a duplicate
// with the first's answer.
func TestTheSameDeliveryOnTwoReplicasIsCommittedOnce(t *testing.T) {
	a, b := replicas(t)
	const rounds = 30
	for round := range rounds {
		key := fmt.Sprint("d", round)
		var resA, resB state.DeliveryResult
		var errA, errB error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; resA, errA = a.CommitDelivery(ctx, hookDelivery(key, "a-", fmt.Sprint("h", round))) })
		wg.Go(func() { <-start; resB, errB = b.CommitDelivery(ctx, hookDelivery(key, "b-", fmt.Sprint("h", round))) })
		close(start)
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)
		require.True(t, resA.Duplicate != resB.Duplicate, "round %d: exactly one duplicate: %+v %+v", round, resA, resB)
		first, dup := resA, resB
		if resA.Duplicate {
			first, dup = resB, resA
		}
		require.Len(t, first.Created, 1)
		assert.Equal(t, first.Created[0], string(dup.Value), "round %d: the duplicate carries the first's answer", round)
	}
}

func TestOnlyOneReplicaTakesALock(t *testing.T) {
	a, b := replicas(t)
	for round := range 30 {
		key := fmt.Sprint("nks/c", round)
		type outcome struct {
			ok     bool
			holder *state.Lock
			err    error
		}
		var oa, ob outcome
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			oa.ok, oa.holder, oa.err = a.AcquireLock(ctx, state.Lock{Key: key, Owner: "run-a"})
		})
		wg.Go(func() {
			<-start
			ob.ok, ob.holder, ob.err = b.AcquireLock(ctx, state.Lock{Key: key, Owner: "run-b"})
		})
		close(start)
		wg.Wait()
		require.NoError(t, oa.err)
		require.NoError(t, ob.err)
		require.True(t, oa.ok != ob.ok, "round %d: exactly one takes %s", round, key)
		loser := oa
		winner := "run-b"
		if oa.ok {
			loser, winner = ob, "run-a"
		}
		require.NotNil(t, loser.holder)
		assert.Equal(t, winner, loser.holder.Owner)
	}
	locks, err := b.Locks(ctx)
	require.NoError(t, err)
	assert.Len(t, locks, 30)
}

func TestADedupKeyClaimedOnOneReplicaIsSeenOnTheOther(t *testing.T) {
	a, b := replicas(t)
	seen, err := a.Dedup(ctx, "schedule/nightly/2030-01-02T03:00:00Z", time.Hour)
	require.NoError(t, err)
	assert.False(t, seen)
	seen, err = b.Dedup(ctx, "schedule/nightly/2030-01-02T03:00:00Z", time.Hour)
	require.NoError(t, err)
	assert.True(t, seen)
}
