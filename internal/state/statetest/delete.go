package statetest

import (
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

func testDeleteRuns(t *testing.T, open opener) {
	t.Run("a finished run is deleted with its steps, events, intents and approvals", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Snapshot = []byte("version: 1\nname: pb\n")
		create(t, s, r, state.Event{Type: "run.created", Time: at(0)})
		create(t, s, newRun("r2", "pb", at(time.Second)))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepSucceeded}, state.Event{Type: "step.succeeded", Step: "a"}))
		ok(t, s.PutIntent(ctx, state.Intent{RunID: "r1", Step: "a", Attempt: 1}))
		ok(t, PutApproval(ctx, s, state.Approval{RunID: "r1", Step: "gate", Approved: true, By: "ann"}))
		r.Status, r.EndedAt = state.RunSucceeded, at(2*time.Second)
		ok(t, s.SaveRun(ctx, r, state.Event{Type: "run.succeeded"}))

		ok(t, s.DeleteRun(ctx, "r1"))

		_, err := s.GetRun(ctx, "r1")
		errIs(t, err, state.ErrNotFound)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runIDs(runs), []string{"r2"})
		_, err = s.GetStep(ctx, "r1", "a")
		errIs(t, err, state.ErrNotFound)
		recs, err := s.Steps(ctx, "r1")
		if err == nil {
			same(t, len(recs), 0)
		}
		evs, err := s.Events(ctx, "r1", 0, 0)
		if err == nil {
			same(t, len(evs), 0)
		}
		_, err = s.GetIntent(ctx, "r1", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetApproval(ctx, "r1", "gate")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a run that is not finished is refused and kept whole", func(t *testing.T) {
		for _, status := range []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting} {
			s, _ := open(t)
			r := newRun("r1", "pb", at(0))
			r.Status = status
			create(t, s, r, state.Event{Type: "run.created"})
			errIs(t, s.DeleteRun(ctx, "r1"), state.ErrNotFinished)
			got, err := s.GetRun(ctx, "r1")
			ok(t, err)
			same(t, got.Status, status)
			evs, err := s.Events(ctx, "r1", 0, 0)
			ok(t, err)
			same(t, len(evs), 1)
		}
	})

	t.Run("every finished status is deleted", func(t *testing.T) {
		s, _ := open(t)
		for i, status := range []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunCancelled, state.RunSkipped} {
			r := newRun(string(status), "pb", at(time.Duration(i)*time.Second))
			r.Status = status
			create(t, s, r)
			ok(t, s.DeleteRun(ctx, r.ID))
		}
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, len(runs), 0)
	})

	t.Run("an unknown run is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		errIs(t, s.DeleteRun(ctx, "nope"), state.ErrNotFound)
	})

	t.Run("a deleted run's ID can be taken again", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Status = state.RunFailed
		create(t, s, r, state.Event{Type: "run.failed"})
		ok(t, s.DeleteRun(ctx, "r1"))
		create(t, s, newRun("r1", "again", at(time.Second)), state.Event{Type: "run.created"})
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{1})
	})
}
