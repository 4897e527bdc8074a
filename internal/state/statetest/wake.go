package statetest

import (
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// testWakeTimes: a parked run's wake time, and a parked step's, survive
// the store: a restarted server reads them from the listing of waiting
// runs and from the step records.
func testWakeTimes(t *testing.T, open opener) {
	t.Run("a parked run's and a parked step's wake times survive the store", func(t *testing.T) {
		s, _ := open(t)
		wake := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
		r := &state.Run{ID: "parked", Playbook: "nap", Status: state.RunPending, CreatedAt: wake.Add(-time.Hour)}
		ok(t, s.CreateRun(ctx, r))
		r.Status, r.WakeAt = state.RunWaiting, wake
		ok(t, s.SaveRun(ctx, r))
		ok(t, s.SaveSteps(ctx, []*state.StepRecord{{RunID: "parked", ID: "nap", Status: state.StepWaiting, Attempts: 1, WakeAt: wake}}))

		got, err := s.GetRun(ctx, "parked")
		ok(t, err)
		if !wake.Equal(got.WakeAt) {
			t.Errorf("GetRun: wake at %s, want %s", got.WakeAt, wake)
		}
		listed, err := s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunWaiting}})
		ok(t, err)
		same(t, len(listed), 1)
		if !wake.Equal(listed[0].WakeAt) {
			t.Errorf("the listing carries it: wake at %s, want %s", listed[0].WakeAt, wake)
		}
		step, err := s.GetStep(ctx, "parked", "nap")
		ok(t, err)
		if !wake.Equal(step.WakeAt) {
			t.Errorf("GetStep: wake at %s, want %s", step.WakeAt, wake)
		}
	})
}
