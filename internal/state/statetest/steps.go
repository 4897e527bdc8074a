package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

func testSteps(t *testing.T, open opener) {
	t.Run("a saved step reads back with every field", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		rec := &state.StepRecord{
			RunID: "r1", ID: "deploy[3]", Status: state.StepFailed, Attempts: 2,
			Outputs:    map[string]any{"id": "x", "n": 2.0},
			Error:      &state.ErrorRecord{Code: "conflict", Message: "exists"},
			Checkpoint: []byte{0, 1, 2, 255},
			StartedAt:  at(time.Second), EndedAt: at(2 * time.Second), NextAttemptAt: at(time.Minute),
		}
		ok(t, s.SaveStep(ctx, rec))
		got, err := s.GetStep(ctx, "r1", "deploy[3]")
		ok(t, err)
		same(t, got, rec)
	})

	t.Run("steps list in the order they were first saved", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		for _, id := range []string{"zeta", "alpha", "mid"} {
			ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: id, Status: state.StepRunning}))
		}
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "zeta", Status: state.StepSucceeded, Attempts: 1}))
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		same(t, stepIDs(steps), []string{"zeta", "alpha", "mid"})
		same(t, steps[0].Status, state.StepSucceeded)
	})

	t.Run("several steps save together with their events, in order", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "first", Status: state.StepSucceeded}))
		ok(t, s.SaveSteps(ctx, []*state.StepRecord{
			{RunID: "r1", ID: "b", Status: state.StepSucceeded},
			{RunID: "r1", ID: "first", Status: state.StepFailed},
			{RunID: "r1", ID: "a", Status: state.StepSkipped},
		}, state.Event{Type: "step.succeeded", Step: "b"}, state.Event{Type: "step.skipped", Step: "a"}))
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		same(t, stepIDs(steps), []string{"first", "b", "a"})
		same(t, steps[0].Status, state.StepFailed)
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		var got []string
		for _, ev := range evs {
			if ev.Step != "" {
				got = append(got, ev.Type+" "+ev.Step)
			}
		}
		same(t, got, []string{"step.succeeded b", "step.skipped a"})
	})

	t.Run("saving steps of a run never created writes nothing", func(t *testing.T) {
		s, _ := open(t)
		err := s.SaveSteps(ctx, []*state.StepRecord{{RunID: "ghost", ID: "a"}}, state.Event{Type: "x"})
		errIs(t, err, state.ErrNotFound)
		err = s.SaveSteps(ctx, []*state.StepRecord{{RunID: "ghost", ID: "b"}}) // no event
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetStep(ctx, "ghost", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetStep(ctx, "ghost", "b")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("saving a step again replaces its record", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning, Checkpoint: []byte("c")}))
		final := &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepSucceeded, Attempts: 1}
		ok(t, s.SaveStep(ctx, final))
		got, err := s.GetStep(ctx, "r1", "a")
		ok(t, err)
		same(t, got, final)
	})

	t.Run("steps of different runs are kept apart", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		create(t, s, newRun("r2", "pb", at(1)))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning}))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r2", ID: "b", Status: state.StepRunning}))
		steps, err := s.Steps(ctx, "r2")
		ok(t, err)
		same(t, stepIDs(steps), []string{"b"})
		_, err = s.GetStep(ctx, "r2", "a")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("saving a step leaves the run record as it was", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r)
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning}))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got, r)
	})

	t.Run("a step saved with events writes both", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "a", Status: state.StepRunning},
			state.Event{Type: "step.started", Step: "a", Attempt: 1, Time: at(time.Second)}))
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, evs, []state.Event{{Seq: 1, Type: "step.started", Step: "a", Attempt: 1, Time: at(time.Second)}})
	})

	t.Run("an unknown step or run is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		_, err := s.GetStep(ctx, "r1", "nope")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetStep(ctx, "ghost", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.Steps(ctx, "ghost")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a run without steps has an empty step list", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		if len(steps) != 0 {
			t.Fatalf("steps = %v", stepIDs(steps))
		}
	})

	t.Run("a step of a run never created is refused with its events", func(t *testing.T) {
		s, _ := open(t)
		err := s.SaveStep(ctx, &state.StepRecord{RunID: "ghost", ID: "a"}, state.Event{Type: "step.started"})
		errIs(t, err, state.ErrNotFound)
		_, err = s.Events(ctx, "ghost", 0, 0)
		errIs(t, err, state.ErrNotFound)
	})
}

func testEvents(t *testing.T, open opener) {
	// seed creates run r1 with events e1..e10 (Seq 1..10).
	seed := func(t *testing.T) state.Store {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)), state.Event{Type: "e1", Time: at(1)})
		for i := 2; i <= 10; i += 3 {
			var evs []state.Event
			for j := i; j < i+3 && j <= 10; j++ {
				evs = append(evs, state.Event{Type: fmt.Sprintf("e%d", j), Time: at(time.Duration(j))})
			}
			ok(t, s.AppendEvents(ctx, "r1", evs...))
		}
		return s
	}
	cases := []struct {
		name  string
		after uint64
		limit int
		want  []uint64
	}{
		{name: "all events come in sequence order", want: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{name: "after skips events up to and including that sequence", after: 7, want: []uint64{8, 9, 10}},
		{name: "a limit caps the count", limit: 3, want: []uint64{1, 2, 3}},
		{name: "after and limit page through the log", after: 3, limit: 4, want: []uint64{4, 5, 6, 7}},
		{name: "after the last event there is nothing", after: 10, want: []uint64{}},
		{name: "after far past the end there is nothing", after: 1 << 62, want: []uint64{}},
		{name: "after the largest sequence there is nothing", after: ^uint64(0), want: []uint64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := seed(t)
			evs, err := s.Events(ctx, "r1", tc.after, tc.limit)
			ok(t, err)
			same(t, seqs(evs), tc.want)
		})
	}

	t.Run("events keep their time and fields", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ev := state.Event{Time: at(42), Type: "log", Step: "a", Attempt: 2, Level: "warn", Message: "hi", Data: map[string]any{"k": []any{"v"}}}
		ok(t, s.AppendEvents(ctx, "r1", ev))
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		ev.Seq = 1
		same(t, evs, []state.Event{ev})
	})

	t.Run("the store assigns sequence numbers whatever the caller set", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ok(t, s.AppendEvents(ctx, "r1", state.Event{Seq: 99, Type: "a", Time: at(0)}, state.Event{Seq: 99, Type: "b", Time: at(0)}))
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{1, 2})
	})

	t.Run("each run numbers its events from 1", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)), state.Event{Type: "a", Time: at(0)}, state.Event{Type: "b", Time: at(0)})
		create(t, s, newRun("r2", "pb", at(1)), state.Event{Type: "c", Time: at(0)})
		ok(t, s.SaveStep(ctx, &state.StepRecord{RunID: "r2", ID: "s"}, state.Event{Type: "d", Time: at(0)}))
		evs, err := s.Events(ctx, "r2", 0, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{1, 2})
		same(t, evs[1].Type, "d")
	})

	t.Run("an event without a time gets one", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		ok(t, s.AppendEvents(ctx, "r1", state.Event{Type: "a"}))
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		if len(evs) != 1 || evs[0].Time.IsZero() {
			t.Fatalf("events = %+v, want one with a time", evs)
		}
	})

	t.Run("appending to a run never created is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		errIs(t, s.AppendEvents(ctx, "ghost", state.Event{Type: "a"}), state.ErrNotFound)
	})

	t.Run("a run without events has an empty log", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		if len(evs) != 0 {
			t.Fatalf("events = %+v", evs)
		}
	})
}
