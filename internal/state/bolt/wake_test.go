package bolt_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A parked run's wake time, and a parked step's, survive the store: a
// restarted server reads them from the listing of waiting runs and from
// the step records.
func TestWakeTimesSurviveTheStore(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, bolt.Options{Timeout: time.Second})
	wake := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	r := &state.Run{ID: "parked", Playbook: "nap", Status: state.RunPending, CreatedAt: wake.Add(-time.Hour)}
	require.NoError(t, s.CreateRun(ctx, r))
	r.Status, r.WakeAt = state.RunWaiting, wake
	require.NoError(t, s.SaveRun(ctx, r))
	require.NoError(t, s.SaveSteps(ctx, []*state.StepRecord{{RunID: "parked", ID: "nap", Status: state.StepWaiting, Attempts: 1, WakeAt: wake}}))

	got, err := s.GetRun(ctx, "parked")
	require.NoError(t, err)
	assert.True(t, wake.Equal(got.WakeAt), "got %s", got.WakeAt)
	listed, err := s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunWaiting}})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.True(t, wake.Equal(listed[0].WakeAt), "the listing carries it: got %s", listed[0].WakeAt)
	step, err := s.GetStep(ctx, "parked", "nap")
	require.NoError(t, err)
	assert.True(t, wake.Equal(step.WakeAt), "got %s", step.WakeAt)
}
