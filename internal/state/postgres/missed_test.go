package postgres_test

import (
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/statetest"
)

// Missed finds, among the runs a replica holds and their sub-playbook
// runs, those recorded cancelled and those whose waiting approval step
// has its final answer — what notices would have said while it did not
// listen — and nothing else.
func TestMissedFindsTheCancelsAndTheAnswersANoticeWouldHaveCarried(t *testing.T) {
	a, b := replicas(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(id, parent string, st state.RunStatus) {
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: id, ParentID: parent, Playbook: "pb", Status: st, CreatedAt: at}))
	}
	waitOn := func(id, step string, answer *state.Approval) {
		require.NoError(t, a.SaveStep(ctx, &state.StepRecord{RunID: id, ID: step, Status: state.StepWaiting}))
		if answer != nil {
			answer.RunID, answer.Step = id, step
			require.NoError(t, statetest.PutApproval(ctx, b, *answer))
		}
	}
	mk("answered", "", state.RunWaiting)
	waitOn("answered", "gate", &state.Approval{Approved: true, By: "ann", At: at})
	mk("rejected", "", state.RunRunning)
	waitOn("rejected", "gate", &state.Approval{Approved: false, By: "ann", At: at})
	mk("needs-more", "", state.RunWaiting)
	waitOn("needs-more", "gate", &state.Approval{Approved: true, By: "ann", At: at, Pending: true})
	mk("unanswered", "", state.RunWaiting)
	waitOn("unanswered", "gate", nil)
	mk("done-step", "", state.RunWaiting) // its answered step went on already
	require.NoError(t, a.SaveStep(ctx, &state.StepRecord{RunID: "done-step", ID: "gate", Status: state.StepSucceeded}))
	require.NoError(t, statetest.PutApproval(ctx, b, state.Approval{RunID: "done-step", Step: "gate", Approved: true, At: at}))
	mk("cancelled", "", state.RunCancelled)
	mk("parent", "", state.RunWaiting)
	mk("parent/child", "parent", state.RunWaiting)
	waitOn("parent/child", "gate", &state.Approval{Approved: true, By: "bob", At: at})
	mk("parent/child/grandchild", "parent/child", state.RunCancelled)
	mk("elsewhere", "", state.RunCancelled) // not this replica's
	mk("elsewhere-answered", "", state.RunWaiting)
	waitOn("elsewhere-answered", "gate", &state.Approval{Approved: true, At: at})

	m, err := a.Missed(ctx, []string{"answered", "rejected", "needs-more", "unanswered", "done-step", "cancelled", "parent", "gone"})
	require.NoError(t, err)
	sort.Strings(m.Cancelled)
	sort.Strings(m.Answered)
	assert.Equal(t, []string{"cancelled", "parent/child/grandchild"}, m.Cancelled)
	assert.Equal(t, []string{"answered", "parent/child", "rejected"}, m.Answered)

	m, err = a.Missed(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, m.Cancelled)
	assert.Empty(t, m.Answered)
}

// Unfinished lists the runs of a playbook in flight on any replica or
// process — queued, executing, parked, suspended, or left by a dead
// replica for another to take over — and not the finished ones, the
// sub-playbook runs, the other playbooks' or those of a process that is
// gone (a runbook run whose lease expired, or an owner that never was a
// replica).
func TestUnfinishedListsTheRunsOfAPlaybookInFlightAnywhere(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.KeepReplica(ctx, "host/a", state.ReplicaServe, time.Minute))
	require.NoError(t, a.KeepReplica(ctx, "host/dead", state.ReplicaServe, time.Millisecond))
	require.NoError(t, a.KeepReplica(ctx, "host/cli", state.ReplicaRun, time.Minute))
	require.NoError(t, a.KeepReplica(ctx, "host/cli-dead", state.ReplicaRun, time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	mk := func(id, pb, parent, owner string, st state.RunStatus) {
		n++
		require.NoError(t, a.CreateRun(ctx, &state.Run{ID: id, ParentID: parent, Playbook: pb, Status: st, Owner: owner, CreatedAt: at.Add(time.Duration(n) * time.Second)}))
	}
	mk("queued", "nightly", "", "", state.RunPending)
	mk("on-a", "nightly", "", "host/a", state.RunRunning)
	mk("parked-on-dead", "nightly", "", "host/dead", state.RunWaiting)
	mk("of-cli", "nightly", "", "host/cli", state.RunRunning)
	mk("suspended", "nightly", "", "", state.RunSuspended)
	mk("of-gone-process", "nightly", "", "host/gone", state.RunRunning)
	mk("of-dead-cli", "nightly", "", "host/cli-dead", state.RunRunning)
	mk("done", "nightly", "", "host/a", state.RunSucceeded)
	mk("cancelled", "nightly", "", "host/a", state.RunCancelled)
	mk("on-a/child", "nightly", "on-a", "host/a", state.RunRunning)
	mk("other", "weekly", "", "host/a", state.RunRunning)

	ids, err := b.Unfinished(ctx, "nightly")
	require.NoError(t, err)
	assert.Equal(t, []string{"queued", "on-a", "parked-on-dead", "of-cli", "suspended"}, ids)
	ids, err = b.Unfinished(ctx, "none")
	require.NoError(t, err)
	assert.Empty(t, ids)
}
