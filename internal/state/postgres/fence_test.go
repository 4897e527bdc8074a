package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

// Replica A claims a run and its lease lapses; replica B takes the run
// over and writes it. Every write A then makes for the run (its fence
// names A) is refused with state.ErrFenced naming B, and writes nothing:
// the run, its steps, intents and events are B's. Writes without a fence
// (an approval answered on A, the CLI's cancel) still work.
func TestAReplicaThatLostARunCannotWriteIt(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Status: state.RunPending}, state.Event{Type: "run.created"}))
	require.NoError(t, a.KeepReplica(ctx, "A", state.ReplicaServe, time.Minute))
	ok, err := a.ClaimRun(ctx, "r1", "A", false)
	require.NoError(t, err)
	require.True(t, ok)

	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
	runByA := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "A", Inputs: map[string]any{"by": "A"}}
	require.NoError(t, a.SaveRun(asA, runByA, state.Event{Type: "run.started"}), "the owner's fenced writes go through")
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepRunning}, state.Event{Type: "step.started", Step: "one"}))
	require.NoError(t, a.PutIntent(asA, state.Intent{RunID: "r1", Step: "one", Attempt: 1, Key: "r1/one"}))

	// A's lease lapses (it was cut off); B takes the run and goes on.
	require.NoError(t, a.KeepReplica(ctx, "A", state.ReplicaServe, time.Microsecond))
	require.Eventually(t, func() bool {
		ok, err := b.ClaimRun(ctx, "r1", "B", false)
		require.NoError(t, err)
		return ok
	}, 5*time.Second, 10*time.Millisecond)
	asB := state.WithFence(ctx, state.Fence{Owner: "B", Run: "r1"})
	runByB := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "B", Inputs: map[string]any{"by": "B"}}
	require.NoError(t, b.SaveRun(asB, runByB, state.Event{Type: "run.resumed"}))
	require.NoError(t, b.SaveStep(asB, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepSucceeded, Outputs: map[string]any{"by": "B"}}))
	require.NoError(t, b.PutIntent(asB, state.Intent{RunID: "r1", Step: "one", Attempt: 2, Key: "r1/one", Resolved: true}))
	evsBefore, err := b.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)

	refused := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, state.ErrFenced, what)
		var fe *state.FencedError
		require.True(t, errors.As(err, &fe), what)
		assert.Equal(t, "B", fe.Owner, "%s: the error names the new owner", what)
		assert.Equal(t, "r1", fe.Run)
	}
	runByA.Status = state.RunSucceeded
	refused("SaveRun", a.SaveRun(asA, runByA, state.Event{Type: "run.succeeded"}))
	refused("SaveStep", a.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepFailed, Outputs: map[string]any{"by": "A"}}, state.Event{Type: "step.failed"}))
	refused("SaveSteps", a.SaveSteps(asA, []*state.StepRecord{{RunID: "r1", ID: "two", Status: state.StepSucceeded}}))
	refused("SaveStep without events", a.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "two", Status: state.StepSucceeded}))
	refused("SaveRunSteps", a.SaveRunSteps(asA, runByA, []*state.StepRecord{{RunID: "r1", ID: "two", Status: state.StepSucceeded}}, state.Event{Type: "run.succeeded"}))
	refused("AppendEvents", a.AppendEvents(asA, "r1", state.Event{Type: "log", Message: "from A"}))
	refused("PutIntent", a.PutIntent(asA, state.Intent{RunID: "r1", Step: "two", Attempt: 1, Key: "r1/two"}))
	refused("CreateRun of a sub-playbook run", a.CreateRun(asA, &state.Run{ID: "r1.two", Playbook: "child", ParentID: "r1", ParentStep: "two"}))
	runByA.CreatedAt = time.Time{} // read from the stored record, in the write's transaction
	refused("SaveRun reading CreatedAt", a.SaveRun(asA, runByA))

	got, err := a.GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, "B", got.Owner)
	assert.Equal(t, state.RunRunning, got.Status)
	assert.Equal(t, map[string]any{"by": "B"}, got.Inputs)
	steps, err := a.Steps(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, steps, 1, "A's new step was not written")
	assert.Equal(t, state.StepSucceeded, steps[0].Status)
	assert.Equal(t, map[string]any{"by": "B"}, steps[0].Outputs)
	in, err := a.GetIntent(ctx, "r1", "one")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Attempt)
	_, err = a.GetIntent(ctx, "r1", "two")
	require.ErrorIs(t, err, state.ErrNotFound, "A's intent was not written: it makes no call")
	_, err = a.GetRun(ctx, "r1.two")
	require.ErrorIs(t, err, state.ErrNotFound)
	evs, err := a.Events(ctx, "r1", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, evsBefore, evs, "no event of A's was appended")

	// B, the owner, goes on; writes made for no owner are not fenced.
	require.NoError(t, b.SaveStep(asB, &state.StepRecord{RunID: "r1", ID: "two", Status: state.StepWaiting}, state.Event{Type: "step.waiting"}))
	require.NoError(t, statetest.PutApproval(ctx, a, state.Approval{RunID: "r1", Step: "two", Approved: true, By: "ops"}), "an approval answered on A")
	got.Status = state.RunCancelled
	require.NoError(t, a.SaveRun(ctx, got, state.Event{Type: "run.cancelled"}), "the CLI's cancel")
	got, err = b.GetRun(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status)
	assert.Equal(t, "B", got.Owner)
}

// A sub-playbook run's writes are fenced on its top-level run: once
// another replica owns the top-level run, the stale replica cannot move
// the sub-playbook run on either.
func TestASubPlaybookRunIsFencedOnItsTopLevelRun(t *testing.T) {
	a, b := replicas(t)
	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "A"}))
	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
	require.NoError(t, a.CreateRun(asA, &state.Run{ID: "r1.c", Playbook: "child", ParentID: "r1", Owner: "A", Status: state.RunPending}))
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: "r1.c", ID: "x", Status: state.StepSucceeded}))

	require.NoError(t, b.SaveRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "B"}))
	err := a.SaveStep(asA, &state.StepRecord{RunID: "r1.c", ID: "y", Status: state.StepSucceeded})
	require.ErrorIs(t, err, state.ErrFenced)
	err = a.SaveRun(asA, &state.Run{ID: "r1.c", Playbook: "child", ParentID: "r1", Status: state.RunSucceeded, Owner: "A"})
	require.ErrorIs(t, err, state.ErrFenced)
	steps, err := b.Steps(ctx, "r1.c")
	require.NoError(t, err)
	assert.Len(t, steps, 1)
	child, err := b.GetRun(ctx, "r1.c")
	require.NoError(t, err)
	assert.Equal(t, state.RunPending, child.Status)
}

// The fence is one plain statement: on a schema without the PL/pgSQL
// function runbook_fence (kept for older builds; a new backend loads the
// language at its first call), the owner's fenced writes go through and a
// lost owner's are refused, naming the owner, for the run and its
// sub-playbook run alike.
func TestTheFenceNeedsNoPLpgSQL(t *testing.T) {
	dsn := pgtest.DB(t)
	a := open(t, dsn, postgres.Options{})
	_, err := connect(t, dsn).Exec(ctx, `DROP FUNCTION runbook_fence(text, text, text)`)
	require.NoError(t, err)

	require.NoError(t, a.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "A"}))
	asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
	require.NoError(t, a.CreateRun(asA, &state.Run{ID: "r1.c", Playbook: "child", ParentID: "r1", Owner: "A", Status: state.RunRunning}))
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepRunning}, state.Event{Type: "step.started", Step: "one"}))
	require.NoError(t, a.SaveStep(asA, &state.StepRecord{RunID: "r1.c", ID: "x", Status: state.StepSucceeded}))

	b := open(t, dsn, postgres.Options{})
	require.NoError(t, b.SaveRun(ctx, &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Owner: "B"}))
	for what, err := range map[string]error{
		"the run's own write":             a.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepSucceeded}),
		"its sub-playbook run's write":    a.SaveStep(asA, &state.StepRecord{RunID: "r1.c", ID: "y", Status: state.StepSucceeded}),
		"a write through the write group": a.AppendEvents(asA, "r1", state.Event{Type: "log", Message: "from A"}),
	} {
		var fe *state.FencedError
		require.True(t, errors.As(err, &fe), "%s: %v", what, err)
		assert.Equal(t, state.FencedError{Run: "r1", Owner: "B"}, *fe, what)
	}
	asB := state.WithFence(ctx, state.Fence{Owner: "B", Run: "r1"})
	require.NoError(t, b.SaveStep(asB, &state.StepRecord{RunID: "r1", ID: "one", Status: state.StepSucceeded}), "the new owner's write")
	steps, err := b.Steps(ctx, "r1.c")
	require.NoError(t, err)
	assert.Len(t, steps, 1, "the refused write wrote nothing")
}
