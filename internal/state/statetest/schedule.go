package statetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/runbook/runbook/internal/state"
)

// RunSchedules runs the contract of state.ScheduleStore (schedule pauses)
// against stores from open, one fresh and empty store per test.
func RunSchedules(t *testing.T, open func(t *testing.T) state.ScheduleStore) {
	t.Helper()
	t.Run("a pause is kept with its reason and listed by playbook then trigger", func(t *testing.T) { testPauses(t, open(t)) })
	t.Run("a pause replaces the pause of its playbook and trigger", func(t *testing.T) { testPauseAgain(t, open(t)) })
	t.Run("a resume deletes only its own pause and returns it", func(t *testing.T) { testResume(t, open(t)) })
}

func testPauses(t *testing.T, s state.ScheduleStore) {
	ctx := context.Background()
	got, err := s.SchedulePauses(ctx, "")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("a new store has pauses: %+v", got)
	}
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: 1, Reason: "one trigger", By: "bob", At: at0}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: state.AllTriggers, Reason: "change freeze", By: "alice", At: at0}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "backup", Trigger: 0, Reason: "disk full", By: "carol"}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly-2", Trigger: 0, Reason: "other", By: "dan", At: at0}))

	got, err = s.SchedulePauses(ctx, "")
	must(t, err)
	var order []string
	for _, p := range got {
		order = append(order, p.Playbook+"/"+strconv.Itoa(p.Trigger))
	}
	if want := "backup/0 nightly/-1 nightly/1 nightly-2/0"; strings.Join(order, " ") != want {
		t.Fatalf("pauses listed %q, want %q", strings.Join(order, " "), want)
	}
	if got[0].At.IsZero() {
		t.Errorf("a pause without a time was not given one: %+v", got[0])
	}
	if p := got[1]; p.Reason != "change freeze" || p.By != "alice" || !p.At.Equal(at0) {
		t.Errorf("pause kept as %+v, want its reason, author and time", p)
	}
	got, err = s.SchedulePauses(ctx, "nightly")
	must(t, err)
	if len(got) != 2 || got[0].Trigger != state.AllTriggers || got[1].Trigger != 1 {
		t.Fatalf("pauses of nightly: %+v, want its two (not nightly-2's)", got)
	}
	if !got[0].Covers(3) || got[1].Covers(0) || !got[1].Covers(1) {
		t.Errorf("Covers: a pause of every trigger covers each, one of trigger 1 only trigger 1")
	}
}

func testPauseAgain(t *testing.T, s state.ScheduleStore) {
	ctx := context.Background()
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: 0, Reason: "first", By: "alice", At: at0}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: 0, Reason: "second", By: "bob", At: at0}))
	got, err := s.SchedulePauses(ctx, "nightly")
	must(t, err)
	if len(got) != 1 || got[0].Reason != "second" || got[0].By != "bob" {
		t.Fatalf("after pausing twice: %+v, want the second pause only", got)
	}
}

func testResume(t *testing.T, s state.ScheduleStore) {
	ctx := context.Background()
	if _, err := s.ResumeSchedule(ctx, "nightly", state.AllTriggers); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("resume of a schedule never paused: got %v, want ErrNotFound", err)
	}
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: state.AllTriggers, Reason: "freeze", By: "alice", At: at0}))
	must(t, s.PauseSchedule(ctx, state.SchedulePause{Playbook: "nightly", Trigger: 0, Reason: "one", By: "bob", At: at0}))
	p, err := s.ResumeSchedule(ctx, "nightly", state.AllTriggers)
	must(t, err)
	if p.Reason != "freeze" || p.By != "alice" {
		t.Errorf("resume returned %+v, want the pause it deleted", p)
	}
	got, err := s.SchedulePauses(ctx, "")
	must(t, err)
	if len(got) != 1 || got[0].Trigger != 0 {
		t.Fatalf("after resuming every trigger: %+v, want trigger 0's own pause kept", got)
	}
	if _, err := s.ResumeSchedule(ctx, "nightly", state.AllTriggers); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("second resume: got %v, want ErrNotFound", err)
	}
}
