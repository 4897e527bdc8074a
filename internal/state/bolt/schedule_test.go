package bolt_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestScheduleContract(t *testing.T) {
	statetest.RunSchedules(t, func(t *testing.T) state.ScheduleStore {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}

// A pause outlives the process that made it: `runbook serve` started
// after a pause reads it.
func TestASchedulePauseSurvivesReopen(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	must(t, s.PauseSchedule(t.Context(), state.SchedulePause{Playbook: "nightly", Trigger: state.AllTriggers, Reason: "freeze", By: "alice"}))
	must(t, s.Close())
	s2, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	must(t, err)
	defer s2.Close()
	got, err := s2.SchedulePauses(t.Context(), "")
	must(t, err)
	if len(got) != 1 || got[0].Reason != "freeze" {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestRunPauseContract(t *testing.T) {
	statetest.RunRunPauses(t, func(t *testing.T) state.RunPauseStore {
		s, _ := openTemp(t, bolt.Options{})
		return s
	})
}

// A run pause outlives the process that made it.
func TestARunPauseSurvivesReopen(t *testing.T) {
	s, path := openTemp(t, bolt.Options{})
	must(t, s.PauseRuns(t.Context(), state.RunPause{ID: "p1", Pattern: "nks-*", Reason: "freeze", By: "alice"}))
	must(t, s.Close())
	s2, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	must(t, err)
	defer s2.Close()
	got, err := s2.RunPauses(t.Context())
	must(t, err)
	if len(got) != 1 || got[0].Why() != "paused by alice: freeze" {
		t.Fatalf("after reopen: %+v", got)
	}
}
