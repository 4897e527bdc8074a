package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

// Two replicas ask for the leader lease at once, many times: one gets it;
// the other gets it only once it expired, with the next term, and the
// first cannot renew the lost term.
func TestTheLeaderLeaseIsHeldByOneReplicaAtATime(t *testing.T) {
	a, b := replicas(t)
	for round := range 20 {
		name := "lead" + string(rune('a'+round))
		var ta, tb int64
		var ea, eb error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; ta, ea = a.Lead(ctx, name, "A", 0, time.Minute) })
		wg.Go(func() { <-start; tb, eb = b.Lead(ctx, name, "B", 0, time.Minute) })
		close(start)
		wg.Wait()
		require.NoError(t, ea)
		require.NoError(t, eb)
		require.True(t, (ta == 1) != (tb == 1), "round %d: exactly one leader: %d %d", round, ta, tb)
		require.Zero(t, ta*tb)
	}

	term, err := a.Lead(ctx, "sched", "A", 0, 300*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, int64(1), term)
	got, err := a.Lead(ctx, "sched", "A", term, 300*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, term, got, "the holder renews its term")
	got, err = b.Lead(ctx, "sched", "B", 0, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, got, "a live lease is not taken")
	got, err = b.Lead(ctx, "sched", "B", 1, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, got, "another holder cannot renew the term")

	time.Sleep(400 * time.Millisecond)
	tb, err := b.Lead(ctx, "sched", "B", 0, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(2), tb, "an expired lease is taken with the next term")
	got, err = a.Lead(ctx, "sched", "A", term, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, got, "the old holder cannot renew its lost term")

	require.NoError(t, b.Resign(ctx, "sched", "B", tb))
	got, err = a.Lead(ctx, "sched", "A", 0, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, int64(3), got, "a resigned lease is free at once")
}

// queueRun creates a top-level run with the given status and owner, created
// age ago.
func queueRun(t *testing.T, s state.Store, id string, st state.RunStatus, owner string, age time.Duration) {
	t.Helper()
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb", Status: st, Owner: owner, CreatedAt: time.Now().Add(-age)}))
}

// upFor waits until the database server has been up for d. The runs of
// a replica whose lease expired are taken only once the server has been
// up for a lease (takeableSince: a lease that expired while the database
// was down is no replica's death), and an earlier test of this binary may
// have restarted it (pgtest.Restart).
func upFor(t *testing.T, d time.Duration) {
	t.Helper()
	var secs float64
	require.NoError(t, connect(t, pgtest.DB(t)).QueryRow(ctx,
		`SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8`).Scan(&secs))
	if wait := d - time.Duration(secs*float64(time.Second)); wait > 0 {
		t.Logf("the database server started %.1fs ago: waiting %s", secs, wait.Round(time.Millisecond))
		time.Sleep(wait)
	}
}

func TestTheQueueHoldsUnownedRunsAndRunsOfExpiredReplicas(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.KeepReplica(ctx, "host/1", state.ReplicaServe, time.Minute))      // alive
	require.NoError(t, a.KeepReplica(ctx, "host/2", state.ReplicaServe, time.Minute))      // dropped below
	require.NoError(t, a.KeepReplica(ctx, "host/3", state.ReplicaServe, time.Millisecond)) // expires
	require.NoError(t, a.DropReplica(ctx, "host/2"))
	time.Sleep(5 * time.Millisecond)

	queueRun(t, a, "pending-old", state.RunPending, "", time.Minute)
	queueRun(t, a, "pending-new", state.RunPending, "", 0)
	queueRun(t, a, "suspended", state.RunSuspended, "", 0)
	queueRun(t, a, "waiting-live", state.RunWaiting, "host/1", time.Minute)
	queueRun(t, a, "running-live", state.RunRunning, "host/1", time.Minute)
	queueRun(t, a, "running-dropped", state.RunRunning, "host/2", time.Minute)
	queueRun(t, a, "waiting-expired", state.RunWaiting, "host/3", time.Minute)
	queueRun(t, a, "pending-expired", state.RunPending, "host/3", 0)
	queueRun(t, a, "running-cli", state.RunRunning, "laptop/99", time.Minute)
	queueRun(t, a, "done", state.RunSucceeded, "", time.Minute)
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "child", Playbook: "pb", Status: state.RunPending, ParentID: "suspended", CreatedAt: time.Now().Add(-time.Minute)}))

	upFor(t, 10*time.Second)
	ids, err := b.ClaimRuns(ctx, "host/4", 100, 10*time.Second, false)
	require.NoError(t, err)
	slices.Sort(ids)
	assert.Equal(t, []string{"pending-expired", "pending-old", "running-dropped", "suspended", "waiting-expired"}, ids)
	for _, id := range ids {
		ok, err := a.ClaimRun(ctx, id, "host/5", false)
		require.NoError(t, err)
		assert.False(t, ok, "%s is host/4's now", id)
	}
	again, err := a.ClaimRuns(ctx, "host/5", 100, 10*time.Second, false)
	require.NoError(t, err)
	assert.Empty(t, again, "claimed runs leave the queue while their replica lives")

	ok, err := b.ClaimRun(ctx, "running-cli", "host/4", false)
	require.NoError(t, err)
	assert.False(t, ok, "a runbook run process's run is not taken over")
	ok, err = b.ClaimRun(ctx, "running-cli", "host/4", true)
	require.NoError(t, err)
	assert.True(t, ok, "an explicit resume adopts it")
	ok, err = b.ClaimRun(ctx, "running-live", "host/4", true)
	require.NoError(t, err)
	assert.False(t, ok, "a live replica's run is never taken")
	ok, err = b.ClaimRun(ctx, "pending-new", "host/4", false)
	require.NoError(t, err)
	assert.True(t, ok, "the replica that committed a pending run claims it at once")
	ok, err = b.ClaimRun(ctx, "done", "host/4", false)
	require.NoError(t, err)
	assert.False(t, ok, "a finished run is not executed")

	kind, expired, err := a.Replica(ctx, "host/3")
	require.NoError(t, err)
	assert.Equal(t, state.ReplicaServe, kind)
	assert.True(t, expired)
	kind, expired, err = a.Replica(ctx, "host/1")
	require.NoError(t, err)
	assert.Equal(t, state.ReplicaServe, kind)
	assert.False(t, expired)
	kind, _, err = a.Replica(ctx, "laptop/99")
	require.NoError(t, err)
	assert.Empty(t, kind, "never a replica")
}

// Replicas claiming at once take disjoint runs, and all of them.
func TestReplicasClaimingAtOnceTakeEachRunOnce(t *testing.T) {
	a, b := replicas(t)
	const runs = 200
	for i := range runs {
		queueRun(t, a, "r"+string(rune('A'+i/26))+string(rune('a'+i%26)), state.RunSuspended, "", 0)
	}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		st := a
		if w%2 == 1 {
			st = b
		}
		replica := "host/" + string(rune('0'+w))
		wg.Go(func() {
			for {
				ids, err := st.ClaimRuns(ctx, replica, 7, 0, false)
				if !assert.NoError(t, err) || len(ids) == 0 {
					return
				}
				mu.Lock()
				for _, id := range ids {
					assert.Empty(t, got[id], "run %s claimed twice", id)
					got[id] = replica
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, got, runs)
}

func TestNoticesReachTheOtherReplica(t *testing.T) {
	a, b := replicas(t)
	notices := make(chan state.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	listening := make(chan error, 1)
	go func() { listening <- b.Listen(lctx, func(n state.Notice) { notices <- n }) }()

	// Listen says when it listens: a notice sent from then on arrives.
	assert.Equal(t, state.Notice{Kind: state.NoticeListening}, next(t, notices))
	require.NoError(t, a.Notify(ctx, state.Notice{Kind: state.NoticeWork}))
	assert.Equal(t, state.Notice{Kind: state.NoticeWork}, next(t, notices))

	queueRun(t, a, "r1", state.RunRunning, "host/1", 0)
	require.NoError(t, statetest.PutApproval(ctx, a, state.Approval{RunID: "r1", Step: "gate", Approved: true}))
	assert.Equal(t, state.Notice{Kind: state.NoticeApproval, RunID: "r1"}, next(t, notices))

	r, err := a.GetRun(ctx, "r1")
	require.NoError(t, err)
	r.Status = state.RunCancelled
	require.NoError(t, a.SaveRun(ctx, r))
	assert.Equal(t, state.Notice{Kind: state.NoticeCancel, RunID: "r1"}, next(t, notices))
	require.NoError(t, a.SaveRun(ctx, r))

	require.NoError(t, a.DropReplica(ctx, "host/1"))
	assert.Equal(t, state.Notice{Kind: state.NoticeWork}, next(t, notices), "a cancelled run saved again is no second cancel")

	stop()
	assert.ErrorIs(t, <-listening, context.Canceled)
}

// Only an answer that decides an approval is noticed: one that leaves
// approvals missing, or the timeout the executing replica records, wakes
// no replica (notices arrive in commit order, so the next one is the
// deciding answer's).
func TestOnlyAnAnswerThatDecidesIsNoticed(t *testing.T) {
	a, b := replicas(t)
	notices := make(chan state.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Listen(lctx, func(n state.Notice) { notices <- n }) }()
	assert.Equal(t, state.Notice{Kind: state.NoticeListening}, next(t, notices))

	for _, id := range []string{"pending", "timed-out", "decided"} {
		queueRun(t, a, id, state.RunWaiting, "host/1", 0)
	}
	require.NoError(t, statetest.PutApproval(ctx, a, state.Approval{RunID: "pending", Step: "gate", Approved: true, By: "ann", Pending: true}))
	require.NoError(t, statetest.PutApproval(ctx, a, state.Approval{RunID: "timed-out", Step: "gate", TimedOut: true}))
	require.NoError(t, statetest.PutApproval(ctx, a, state.Approval{RunID: "decided", Step: "gate", Approved: false, By: "bob"}))
	assert.Equal(t, state.Notice{Kind: state.NoticeApproval, RunID: "decided"}, next(t, notices))
}

func next(t *testing.T, ch <-chan state.Notice) state.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5 s")
		return state.Notice{}
	}
}

// runReplicas makes two runbook run processes replicas of kind run:
// laptop/7@1's lease has expired (it died), laptop/8@1's lives;
// laptop/9@1 never was a replica. The database has been up for the
// replicas' lease of the tests (10 s), so that an expired lease counts.
func runReplicas(t *testing.T, st state.Coordinator) {
	t.Helper()
	require.NoError(t, st.KeepReplica(ctx, "laptop/7@1", state.ReplicaRun, time.Millisecond))
	require.NoError(t, st.KeepReplica(ctx, "laptop/8@1", state.ReplicaRun, time.Minute))
	time.Sleep(5 * time.Millisecond)
	upFor(t, 10*time.Second)
}

// A runbook run process is a replica of kind run: once its lease
// expired, its runs are taken from the queue only by replicas told to
// take over such processes (server.take_over_run_processes); a process
// renewing its lease, or one that never was a replica, keeps its runs.
func TestTheQueueTakesARunProcessesRunsOnlyWhenAskedOnceItsLeaseLapsed(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.KeepReplica(ctx, "host/1", state.ReplicaServe, time.Minute))
	runReplicas(t, a)
	queueRun(t, a, "cli-dead", state.RunRunning, "laptop/7@1", time.Minute)
	queueRun(t, a, "cli-alive", state.RunWaiting, "laptop/8@1", time.Minute)
	queueRun(t, a, "cli-no-lease", state.RunRunning, "laptop/9@1", time.Minute)

	ids, err := b.ClaimRuns(ctx, "host/1", 100, 10*time.Second, false)
	require.NoError(t, err)
	assert.Empty(t, ids, "without being asked, no runbook run process's run is taken")

	ids, err = b.ClaimRuns(ctx, "host/1", 100, 10*time.Second, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"cli-dead"}, ids)
	require.NoError(t, a.KeepReplica(ctx, "host/2", state.ReplicaServe, time.Minute))
	ok, err := a.ClaimRun(ctx, "cli-dead", "host/2", false)
	require.NoError(t, err)
	assert.False(t, ok, "the run is host/1's now")
}

// A run whose playbook says take_over: true (Run.TakeOver) is taken from
// the queue once its runbook run process's lease expired, without the
// replicas being told to take every such run; while the process lives,
// or when it never was a replica, it is not.
func TestTheQueueTakesARunProcessesRunWhosePlaybookOptsInOnceItsLeaseLapsed(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.KeepReplica(ctx, "host/1", state.ReplicaServe, time.Minute))
	runReplicas(t, a)
	for _, r := range []struct {
		id, owner string
		takeOver  bool
	}{
		{"opted-in-dead", "laptop/7@1", true},
		{"not-opted-in-dead", "laptop/7@1", false},
		{"opted-in-alive", "laptop/8@1", true},
		{"opted-in-no-lease", "laptop/9@1", true},
	} {
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: r.id, Playbook: "pb", Status: state.RunRunning, Owner: r.owner, TakeOver: r.takeOver, CreatedAt: time.Now().Add(-time.Minute)}))
	}

	ids, err := b.ClaimRuns(ctx, "host/1", 100, 10*time.Second, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"opted-in-dead"}, ids)
	got, err := a.GetRun(ctx, "opted-in-dead")
	require.NoError(t, err)
	assert.True(t, got.TakeOver, "the record keeps the playbook's choice")
}

// A concurrency key that another run asked for while it was held,
// released by one replica (its lock row deleted, by ReleaseLock or
// otherwise), is a notice to the others, with the key; a release that
// frees nothing, or frees a key nobody asked for, sends none (each notice
// is a commit that waits for the one before). A key too long for a notice
// is sent empty.
func TestAReleasedKeyIsANoticeToTheOtherReplica(t *testing.T) {
	a, b := replicas(t)
	notices := make(chan state.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Listen(lctx, func(n state.Notice) { notices <- n }) }()
	require.Equal(t, state.Notice{Kind: state.NoticeListening}, next(t, notices))
	// take acquires key for owner, and makes another run ask for it when
	// waited.
	take := func(key, owner string, waited bool) {
		t.Helper()
		ok, _, err := a.AcquireLock(ctx, state.Lock{Key: key, Owner: owner})
		require.NoError(t, err)
		require.True(t, ok)
		if waited {
			ok, holder, err := b.AcquireLock(ctx, state.Lock{Key: key, Owner: "queued"})
			require.NoError(t, err)
			require.False(t, ok)
			require.Equal(t, owner, holder.Owner)
		}
	}

	take("quiet", "r0", false)
	require.NoError(t, a.ReleaseLock(ctx, "quiet", "r0"))
	take("nks/prod", "r1", true)
	require.Error(t, a.ReleaseLock(ctx, "nks/prod", "someone-else"), "held by r1: nothing deleted, no notice")
	require.NoError(t, a.ReleaseLock(ctx, "nks/prod", "r1"))
	assert.Equal(t, state.Notice{Kind: state.NoticeKeyFreed, Key: "nks/prod"}, next(t, notices), "the first notice: none for quiet")

	long := strings.Repeat("k", 7500)
	take(long, "r2", true)
	require.NoError(t, a.ReleaseLock(ctx, long, "r2"))
	assert.Equal(t, state.Notice{Kind: state.NoticeKeyFreed}, next(t, notices))

	require.NoError(t, a.Notify(ctx, state.Notice{Kind: state.NoticeKeyFreed, Key: "by-hand"}))
	assert.Equal(t, state.Notice{Kind: state.NoticeKeyFreed, Key: "by-hand"}, next(t, notices))
}

// A replica renews its lease while every pooled connection is busy (the
// writes of the runs it recovers after a database fault) instead of
// queueing behind them until the lease lapses, and renews it again after
// the database cut its connection.
func TestAReplicaRenewsItsLeaseWhileEveryPooledConnectionIsBusy(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{MaxConns: 2})
	postgres.HoldPool(t, s)
	renew := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return s.KeepReplica(ctx, "busy/1", state.ReplicaServe, 3*time.Second)
	}
	require.NoError(t, renew(), "a renewal with every pooled connection taken")
	pgtest.Terminate(t)
	if err := renew(); err != nil {
		t.Logf("the renewal on the cut connection: %v", err)
		require.NoError(t, renew(), "the next renewal connects anew")
	}
}

// The replicas that left do not pile up: a replica leaving takes the
// rows of those whose lease ended over an hour before and that own no
// unfinished run (each runbook run process on the database is a
// replica). It keeps the row of one whose run is unfinished, which says
// that run is interrupted, and of one that left or stopped renewing
// within the hour.
func TestLeftReplicasOwningNoUnfinishedRunAreForgotten(t *testing.T) {
	dsn := pgtest.DB(t)
	a := open(t, dsn, postgres.Options{})
	db := connect(t, dsn)
	rows := func() (ids []string) {
		t.Helper()
		r, err := db.Query(ctx, `SELECT id FROM runbook_replicas ORDER BY id`)
		require.NoError(t, err)
		ids, err = pgx.CollectRows(r, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	leftLongAgo := func(id string) {
		t.Helper()
		_, err := db.Exec(ctx, `UPDATE runbook_replicas SET expires_at = now() - interval '61 minutes' WHERE id = $1`, id)
		require.NoError(t, err)
	}
	require.NoError(t, a.KeepReplica(ctx, "host/killed", state.ReplicaRun, time.Minute))
	queueRun(t, a, "interrupted", state.RunRunning, "host/killed", 0)
	leftLongAgo("host/killed")
	require.NoError(t, a.KeepReplica(ctx, "host/serve", state.ReplicaServe, time.Minute))
	require.NoError(t, a.KeepReplica(ctx, "host/paused", state.ReplicaServe, time.Millisecond))
	for i := range 50 {
		id := fmt.Sprintf("host/run-%02d", i)
		require.NoError(t, a.KeepReplica(ctx, id, state.ReplicaRun, time.Minute))
		queueRun(t, a, fmt.Sprintf("done-%d", i), state.RunSucceeded, id, 0)
		require.NoError(t, a.DropReplica(ctx, id))
		leftLongAgo(id)
	}
	assert.Equal(t, []string{"host/killed", "host/paused", "host/run-49", "host/serve"}, rows(),
		"the replica owning an unfinished run, the one expired within the hour, the last to leave, the live one")
	kind, expired, err := a.Replica(ctx, "host/killed")
	require.NoError(t, err)
	assert.Equal(t, state.ReplicaRun, kind)
	assert.True(t, expired, "its run is shown interrupted")
}

// A replica's first renewal (its joining) takes an idle pooled connection
// and the lease's own connection is dialled a sixth of the lease later;
// a store closed before then or at once after leaves no connection
// behind, the one dialled ahead closed as it arrives. The renewals after
// go over the lease's connection (the test above holds them to that with
// every pooled connection busy).
func TestAStoreClosedAfterItsFirstRenewalLeavesNoConnection(t *testing.T) {
	dsn := pgtest.DB(t)
	db := connect(t, dsn)
	backends := func() int { return clientBackends(t, db) }
	before := backends() // the harness's own
	for _, ttl := range []time.Duration{3 * time.Second, 3 * time.Second, 0, 0, 0} {
		s, err := postgres.Open(ctx, dsn, postgres.Options{})
		require.NoError(t, err)
		require.NoError(t, s.KeepReplica(ctx, "first/1", state.ReplicaRun, ttl))
		if ttl == 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Millisecond)))) // closed as the dial goes on, or after
		}
		require.NoError(t, s.Close())
	}
	assert.Eventually(t, func() bool { return backends() == before }, 5*time.Second, 10*time.Millisecond,
		"client connections: %d before, %d after", before, backends())
}

// clientBackends counts the client connections to db's database but db's
// own.
func clientBackends(t *testing.T, db *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&n))
	return n
}

// A process whose run ends within a sixth of its lease (runbook run of a
// short playbook) opens one connection to the database, not two; one
// that lives longer has its lease's connection dialled before its second
// renewal is due.
func TestAShortLivedReplicaOpensOneConnection(t *testing.T) {
	dsn := pgtest.DB(t)
	db := connect(t, dsn)
	backends := func() int { return clientBackends(t, db) }
	before := backends()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	require.NoError(t, err)
	require.NoError(t, s.KeepReplica(ctx, "short/1", state.ReplicaRun, time.Minute))
	time.Sleep(300 * time.Millisecond) // a dial started now would be done
	assert.Equal(t, before+1, backends(), "the pool's connection only, 300 ms after joining")
	require.NoError(t, s.Close())
	assert.Eventually(t, func() bool { return backends() == before }, 5*time.Second, 10*time.Millisecond)

	s, err = postgres.Open(ctx, dsn, postgres.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.KeepReplica(ctx, "long/1", state.ReplicaRun, 600*time.Millisecond))
	assert.Eventually(t, func() bool { return backends() == before+2 }, 5*time.Second, 10*time.Millisecond,
		"the lease's connection dialled ahead: %d connections", backends())
}
