package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/trigger"
)

// countedClaims is a PostgreSQL store that counts the claims of single
// runs made through it.
type countedClaims struct {
	*postgres.Store
	claims atomic.Int32
}

func (c *countedClaims) ClaimRun(ctx context.Context, id, replica string, adopt bool) (bool, error) {
	c.claims.Add(1)
	return c.Store.ClaimRun(ctx, id, replica, adopt)
}

// pgStore opens a PostgreSQL store on a new database of the test server,
// closed when t ends.
func pgStore(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openReplica opens a serve replica's host with options o on o's store
// (a PostgreSQL one), with the note playbook.
func openReplica(t *testing.T, o Options) (*Host, *playbook.Playbook) {
	t.Helper()
	o.Engine.Environ = []string{}
	h := New(o)
	require.NoError(t, h.Open(context.Background()))
	t.Cleanup(h.Close)
	pb, err := playbook.Parse("note.yaml", []byte(notePlaybook), playbook.LoadOptions{})
	require.NoError(t, err)
	h.Remember(pb)
	return h, pb
}

// A run a serve replica prepares while it has a slot for it is committed
// already claimed (its owner in the committing transaction) and executed
// without a claim of its own; one prepared when the slots are spoken for
// is committed without an owner and claimed when it gets a slot, so that
// the other replicas could take it after a lease meanwhile.
func TestARunPreparedWithASlotFreeIsCommittedClaimedAndOneWithoutIsNot(t *testing.T) {
	ctx := context.Background()
	st := pgStore(t)
	store := &countedClaims{Store: st}
	const replica = "serve-host/1@1"
	h, pb := openReplica(t, Options{MaxRunning: 1, Engine: engine.Options{Store: store, Process: replica}})

	req := trigger.StartRequest{Playbook: pb, Inputs: map[string]any{"who": "x"}, Trigger: map[string]any{"type": "webhook"}}
	first, firstEvs, err := h.Prepare(ctx, req)
	require.NoError(t, err)
	second, secondEvs, err := h.Prepare(ctx, req) // the one slot is the first's
	require.NoError(t, err)
	assert.Equal(t, replica, first.Owner, "prepared with a slot free: committed as the replica's")
	assert.Empty(t, second.Owner, "prepared with no slot free: committed without an owner")

	_, err = st.CommitDelivery(ctx, state.Delivery{Key: "d1", TTL: time.Hour, Units: []state.DeliveryUnit{
		{Run: first, Events: firstEvs}, {Run: second, Events: secondEvs},
	}})
	require.NoError(t, err)
	for id, want := range map[string]string{first.ID: replica, second.ID: ""} {
		stored, err := st.GetRun(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, state.RunPending, stored.Status)
		assert.Equal(t, want, stored.Owner, "run %s as committed", id)
	}
	status, ok := st.ClaimedStatus(first.ID)
	assert.True(t, ok, "the status of a run committed claimed is kept for its launch")
	assert.Equal(t, state.RunPending, status)
	_, ok = st.ClaimedStatus(second.ID)
	assert.False(t, ok, "nothing is kept of a run committed without an owner")

	h.Launch(first, second)
	for _, id := range []string{first.ID, second.ID} {
		require.Eventually(t, func() bool {
			run, err := st.GetRun(ctx, id)
			return err == nil && run.Status == state.RunSucceeded
		}, 10*time.Second, 10*time.Millisecond, "run %s", id)
	}
	assert.EqualValues(t, 1, store.claims.Load(), "only the run committed without an owner is claimed")

	// Both ended and gave their slot back: the next run prepared is
	// committed claimed again.
	require.Eventually(t, func() bool { return h.Running() == 0 }, 10*time.Second, 10*time.Millisecond)
	third, _, err := h.Prepare(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, replica, third.Owner)
}

// A run committed already claimed whose launch was lost (its commit's
// answer was not heard, so its caller never launched it) is not left
// pending: its replica, whose run it is, takes it from the queue a lease
// after it was created, as another replica would take an unowned one.
func TestARunCommittedClaimedButNotLaunchedIsTakenUpByItsReplica(t *testing.T) {
	ctx := context.Background()
	st := pgStore(t)
	const replica, lease = "serve-host/2@1", time.Second
	h, pb := openReplica(t, Options{Lease: lease, Engine: engine.Options{Store: st, Process: replica}})
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go h.Run(runCtx)

	prepared := time.Now() // the run's creation is no earlier
	run, evs, err := h.Prepare(ctx, trigger.StartRequest{Playbook: pb, Inputs: map[string]any{"who": "x"}, Trigger: map[string]any{"type": "webhook"}})
	require.NoError(t, err)
	require.Equal(t, replica, run.Owner)
	_, err = st.CommitDelivery(ctx, state.Delivery{Key: "lost", TTL: time.Hour, Units: []state.DeliveryUnit{{Run: run, Events: evs}}})
	require.NoError(t, err)
	// Not launched.
	var ended time.Time
	require.Eventually(t, func() bool {
		got, err := st.GetRun(ctx, run.ID)
		if err == nil && got.Status == state.RunSucceeded {
			ended = time.Now()
			return true
		}
		return false
	}, 15*time.Second, 20*time.Millisecond)
	assert.GreaterOrEqual(t, ended.Sub(prepared), lease, "left to its launch for a lease after its creation first")
	events, err := st.Events(ctx, run.ID, 0, 0)
	require.NoError(t, err)
	var msgs []string
	for _, ev := range events {
		msgs = append(msgs, ev.Type+" "+ev.Message)
	}
	assert.Contains(t, msgs, "log hi x", "launched with its raw inputs, as its caller would have: %q", msgs)
}

// A run prepared as the replica's holds its slot only for a moment
// (slotHoldFor): one never launched (its delivery a duplicate, its commit
// failed) costs the replica nothing lasting, as trigger.Preparer asks.
func TestASlotHeldForARunNeverLaunchedIsLetGo(t *testing.T) {
	ctx := context.Background()
	st := pgStore(t)
	const replica = "serve-host/3@1"
	h, pb := openReplica(t, Options{MaxRunning: 1, Engine: engine.Options{Store: st, Process: replica}})
	req := trigger.StartRequest{Playbook: pb, Inputs: map[string]any{"who": "x"}, Trigger: map[string]any{"type": "webhook"}}

	dup, _, err := h.Prepare(ctx, req) // never committed nor launched
	require.NoError(t, err)
	require.Equal(t, replica, dup.Owner)
	next, _, err := h.Prepare(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, next.Owner, "the one slot is held for the first")

	time.Sleep(slotHoldFor)
	later, _, err := h.Prepare(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, replica, later.Owner, "the hold of the run never launched was let go")
}

// A keyed run committed already claimed holds its concurrency key from
// the transaction that commits it, when the key is free: it executes
// holding it (its AcquireLock answered by what the commit took) and frees
// it with its end. One committed without an owner takes its key when it
// executes, as before.
func TestAKeyedRunCommittedClaimedHoldsItsKeyFromItsCommit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	st, err := postgres.Open(ctx, dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const replica = "serve-host/4@1"
	h, _ := openReplica(t, Options{MaxRunning: 1, Engine: engine.Options{Store: st, Process: replica}})
	pb, err := playbook.Parse("keyed.yaml", []byte(`version: 1
name: keyed
inputs:
  who: {type: string}
concurrency: {key: 'k/${{ inputs.who }}'}
steps:
  - {id: a, uses: log, with: {message: "hi ${{ inputs.who }}"}}
`), playbook.LoadOptions{})
	require.NoError(t, err)
	h.Remember(pb)

	req := func(who string) trigger.StartRequest {
		return trigger.StartRequest{Playbook: pb, Inputs: map[string]any{"who": who}, Trigger: map[string]any{"type": "webhook"}}
	}
	first, firstEvs, err := h.Prepare(ctx, req("x"))
	require.NoError(t, err)
	second, secondEvs, err := h.Prepare(ctx, req("y")) // the one slot is the first's
	require.NoError(t, err)
	require.Equal(t, replica, first.Owner)
	require.Empty(t, second.Owner)
	_, err = st.CommitDelivery(ctx, state.Delivery{Key: "d1", TTL: time.Hour, Units: []state.DeliveryUnit{
		{Run: first, Events: firstEvs}, {Run: second, Events: secondEvs},
	}})
	require.NoError(t, err)

	locks, err := st.Locks(ctx)
	require.NoError(t, err)
	require.Len(t, locks, 1, "only the run committed claimed took its key")
	assert.Equal(t, "k/x", locks[0].Key)
	assert.Equal(t, first.ID, locks[0].Owner)
	assert.Equal(t, replica, locks[0].Process)

	h.Launch(first, second)
	waitRun(t, st, first.ID, state.RunSucceeded)
	waitRun(t, st, second.ID, state.RunSucceeded)
	locks, err = st.Locks(ctx)
	require.NoError(t, err)
	assert.Empty(t, locks, "both keys freed with their runs' ends")
}

// A keyed run committed already claimed holds its key from its commit.
// Cancelled while it waits in its replica's queue for a slot (by another
// process, or by its replica: a schedule's overlap: replace), it never
// executes: its replica releases its key as it takes it from the queue,
// instead of leaving it held until the runs queued on it find it stale.
func TestAKeyedRunCancelledWhileQueuedLetsItsKeyGo(t *testing.T) {
	for _, by := range []string{"another process", "its replica"} {
		t.Run(by, func(t *testing.T) { testCancelledWhileQueued(t, by == "its replica") })
	}
}

func testCancelledWhileQueued(t *testing.T, byItsReplica bool) {
	ctx := context.Background()
	st := pgStore(t)
	const replica = "serve-host/5@1"
	h, _ := openReplica(t, Options{MaxRunning: 1, Engine: engine.Options{Store: st, Process: replica}})
	parse := func(src string) *playbook.Playbook {
		pb, err := playbook.Parse("pb.yaml", []byte(src), playbook.LoadOptions{})
		require.NoError(t, err)
		h.Remember(pb)
		return pb
	}
	keyed := parse("version: 1\nname: keyed\nconcurrency: {key: the-key}\nsteps:\n  - {id: a, uses: log, with: {message: hi}}\n")
	slow := parse("version: 1\nname: slow\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 1500ms}}\n") // keeps its slot

	run, evs, err := h.Prepare(ctx, trigger.StartRequest{Playbook: keyed, Trigger: map[string]any{"type": "webhook"}})
	require.NoError(t, err)
	require.Equal(t, replica, run.Owner, "prepared with the slot free: committed claimed")
	other, otherEvs, err := h.Prepare(ctx, trigger.StartRequest{Playbook: slow, Trigger: map[string]any{"type": "webhook"}})
	require.NoError(t, err)
	_, err = st.CommitDelivery(ctx, state.Delivery{Key: "d1", TTL: time.Hour, Units: []state.DeliveryUnit{{Run: run, Events: evs}, {Run: other, Events: otherEvs}}})
	require.NoError(t, err)
	locks, err := st.Locks(ctx)
	require.NoError(t, err)
	require.Len(t, locks, 1)
	require.Equal(t, run.ID, locks[0].Owner, "the key taken with the commit")

	h.Launch(other) // takes the one slot for 1.5 s
	require.Eventually(t, func() bool { return h.Running() == 1 }, 5*time.Second, 5*time.Millisecond)
	h.Launch(run) // queued behind it
	require.Equal(t, 1, h.Queued())
	if byItsReplica {
		h.Cancel(run.ID)
	} else { // another replica's API, the CLI
		cancelled, err := st.GetRun(ctx, run.ID)
		require.NoError(t, err)
		cancelled.Status, cancelled.EndedAt = state.RunCancelled, time.Now()
		require.NoError(t, st.SaveRun(ctx, cancelled, state.Event{Type: "run.cancelled"}))
	}

	waitRun(t, st, other.ID, state.RunSucceeded)
	require.Eventually(t, func() bool { return h.Queued() == 0 && h.Running() == 0 }, 5*time.Second, 5*time.Millisecond)
	got, err := st.GetRun(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status, "it never executed")
	locks, err = st.Locks(ctx)
	require.NoError(t, err)
	assert.Empty(t, locks, "its key was let go as it left the queue")
}

// refusedClaims is a PostgreSQL store whose claims of single runs are
// refused once refuse is set, as when another replica took the run over.
type refusedClaims struct {
	*postgres.Store
	refuse atomic.Bool
}

func (c *refusedClaims) ClaimRun(ctx context.Context, id, replica string, adopt bool) (bool, error) {
	if c.refuse.Load() {
		return false, nil
	}
	return c.Store.ClaimRun(ctx, id, replica, adopt)
}

// A cancel answered through a replica (the API's CancelRun) for a run it
// holds but does not execute (parked, woken, waiting for the slot) is
// recorded when the replica finds, as the slot frees, that another
// replica took the run over: that one stops it on the notice. Before, the
// cancel stayed noted in this replica's memory and the run went on
// elsewhere, uncancelled.
func TestACancelAnsweredForARunAnotherReplicaTookOverIsRecorded(t *testing.T) {
	ctx := context.Background()
	st := pgStore(t)
	store := &refusedClaims{Store: st}
	h, _ := openReplica(t, Options{MaxRunning: 1, Engine: engine.Options{Store: store, Process: "serve-host/1@1"}})
	t.Cleanup(func() { h.Suspend(5 * time.Second) })

	gate, err := h.StartRun(ctx, gatePlaybook(t), engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.isParked(gate.ID) }, 5*time.Second, time.Millisecond, "never parked")
	busy, err := playbook.Parse("busy.yaml", []byte("version: 1\nname: busy\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 500ms}}\n"), playbook.LoadOptions{})
	require.NoError(t, err)
	blocker, err := h.StartRun(ctx, busy, engine.StartRequest{})
	require.NoError(t, err)
	waitRun(t, st, blocker.ID, state.RunRunning)

	store.refuse.Store(true) // taken over meanwhile: its next claim is refused
	require.True(t, h.CancelRun(gate.ID, &fault.Error{Code: fault.Cancelled, Message: "cancelled by bob"}), "answered: cancelling")
	require.Equal(t, 1, h.Queued(), "woken, it waits for the slot")

	waitRun(t, st, blocker.ID, state.RunSucceeded)
	waitRun(t, st, gate.ID, state.RunCancelled)
	got, err := st.GetRun(ctx, gate.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Error)
	assert.Equal(t, "run cancelled: cancelled by bob", got.Error.Message)
	require.Eventually(t, func() bool { return !h.Holds(gate.ID) }, 5*time.Second, time.Millisecond, "let go")
}
