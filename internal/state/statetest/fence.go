package statetest

import (
	"errors"
	"testing"

	"github.com/runbook/runbook/internal/state"
)

// testFence checks writes made with a fence (state.WithFence). The
// owner's writes go through in every store. Once another process owns
// the run, a store shared by several processes refuses the old owner's
// writes with state.ErrFenced, writing nothing; a store held by one
// process may accept them (no other process can have taken the run), but
// it refuses all of them or none.
func testFence(t *testing.T, open opener) {
	t.Run("the owner's fenced writes go through", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Owner = "A"
		create(t, s, r)
		asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
		r.Status = state.RunRunning
		ok(t, s.SaveRun(asA, r, state.Event{Type: "run.started"}))
		ok(t, s.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning}, state.Event{Type: "step.started"}))
		ok(t, s.SaveSteps(asA, []*state.StepRecord{{RunID: "r1", ID: "b", Status: state.StepSucceeded}}))
		ok(t, s.PutIntent(asA, state.Intent{RunID: "r1", Step: "a", Attempt: 1, Key: "r1/a"}))
		ok(t, s.AppendEvents(asA, "r1", state.Event{Type: "log"}))
		child := newRun("r1.c", "child", at(1))
		child.ParentID = "r1"
		ok(t, s.CreateRun(asA, child))
		r.Status = state.RunSucceeded
		ok(t, s.SaveRunSteps(asA, r, []*state.StepRecord{{RunID: "r1", ID: "a", Status: state.StepSucceeded}}, state.Event{Type: "run.succeeded"}))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Status, state.RunSucceeded)
	})

	t.Run("a former owner's writes are refused whole, or all accepted", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Owner, r.Status = "A", state.RunRunning
		create(t, s, r)
		// Another process takes the run over (its claim, as an unfenced
		// write of the record).
		byB := *r
		byB.Owner, byB.Inputs = "B", map[string]any{"by": "B"}
		ok(t, s.SaveRun(ctx, &byB, state.Event{Type: "run.resumed"}))
		before, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)

		asA := state.WithFence(ctx, state.Fence{Owner: "A", Run: "r1"})
		byA := *r
		byA.Status = state.RunSucceeded
		child := newRun("r1.c", "child", at(1))
		child.ParentID = "r1"
		writes := []struct {
			name string
			err  error
		}{
			{"PutIntent", s.PutIntent(asA, state.Intent{RunID: "r1", Step: "a", Attempt: 1, Key: "r1/a"})},
			{"SaveStep", s.SaveStep(asA, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepSucceeded}, state.Event{Type: "step.succeeded"})},
			{"SaveSteps", s.SaveSteps(asA, []*state.StepRecord{{RunID: "r1", ID: "b", Status: state.StepSucceeded, Printed: lines("b", 1, "by A")}})},
			{"AppendEvents", s.AppendEvents(asA, "r1", state.Event{Type: "log"})},
			{"CreateRun of a sub-playbook run", s.CreateRun(asA, child)},
			{"SaveRunSteps", s.SaveRunSteps(asA, &byA, []*state.StepRecord{{RunID: "r1", ID: "c", Status: state.StepSucceeded, Printed: lines("c", 1, "by A")}}, state.Event{Type: "run.succeeded"})},
			{"SaveRun", s.SaveRun(asA, &byA, state.Event{Type: "run.succeeded"})},
		}
		refused := 0
		for _, w := range writes {
			switch {
			case w.err == nil:
			case errors.Is(w.err, state.ErrFenced):
				refused++
			default:
				t.Fatalf("%s: %v, want nil or state.ErrFenced", w.name, w.err)
			}
		}
		if refused == 0 {
			return // a store held by one process
		}
		if refused != len(writes) {
			t.Fatalf("%d of %d writes refused: a store fences every write or none", refused, len(writes))
		}
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Owner, "B")
		same(t, got.Status, state.RunRunning)
		same(t, got.Inputs, map[string]any{"by": "B"})
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		same(t, len(steps), 0)
		_, err = s.GetIntent(ctx, "r1", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetRun(ctx, "r1.c")
		errIs(t, err, state.ErrNotFound)
		after, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, after, before)
		printed, err := s.Output(ctx, "r1", state.OutputFilter{})
		ok(t, err)
		same(t, len(printed), 0)
	})
}
