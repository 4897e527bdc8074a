package statetest

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
)

func testRunSteps(t *testing.T, open opener) {
	t.Run("a run's last steps and its end save together, events in order", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r)
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning}))
		r.Status, r.EndedAt = state.RunSucceeded, at(5)
		ok(t, s.SaveRunSteps(ctx, r, []*state.StepRecord{
			{RunID: "r1", ID: "b", Status: state.StepSucceeded},
			{RunID: "r1", ID: "a", Status: state.StepSucceeded, Attempts: 1},
		}, state.Event{Type: "step.succeeded", Step: "b"}, state.Event{Type: "run.succeeded"}))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Status, state.RunSucceeded)
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		same(t, stepIDs(steps), []string{"a", "b"})
		same(t, steps[0].Status, state.StepSucceeded)
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		same(t, types[len(types)-2:], []string{"step.succeeded", "run.succeeded"})
	})

	t.Run("without records it saves the run as SaveRun does", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r)
		r.Status = state.RunFailed
		ok(t, s.SaveRunSteps(ctx, r, nil))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Status, state.RunFailed)
	})

	t.Run("a run never created writes nothing", func(t *testing.T) {
		s, _ := open(t)
		err := s.SaveRunSteps(ctx, newRun("ghost", "pb", at(0)), []*state.StepRecord{{RunID: "ghost", ID: "a"}}, state.Event{Type: "x"})
		errIs(t, err, state.ErrNotFound)
		err = s.SaveRunSteps(ctx, newRun("ghost", "pb", at(0)), []*state.StepRecord{{RunID: "ghost", ID: "b"}}) // no event
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetStep(ctx, "ghost", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetStep(ctx, "ghost", "b")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a record of another run is refused and nothing is written", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r)
		create(t, s, newRun("r2", "pb", at(1)))
		r.Status = state.RunSucceeded
		err := s.SaveRunSteps(ctx, r, []*state.StepRecord{{RunID: "r2", ID: "a"}})
		if err == nil {
			t.Fatal("a record of another run was accepted")
		}
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Status, state.RunPending)
		_, err = s.GetStep(ctx, "r2", "a")
		errIs(t, err, state.ErrNotFound)
	})
}
