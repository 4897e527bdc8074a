package easymaker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
)

func TestATuningRunsItsTrialsAndPicksTheBest(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "tune", ParallelTrialCount: 2, MaxTrialCount: 6})
	assert.Equal(t, em.StatusCreateRequested, tu.HyperparameterTuningStatusCode)

	e.advance(2 * time.Minute)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusRunning, tu.HyperparameterTuningStatusCode)
	assert.Len(t, tu.TrialList, 2, "two trials run in parallel")
	assert.Empty(t, tu.BestTrainingID, "no best before the tuning finished")

	e.advance(time.Hour)
	tu, err = e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	require.Equal(t, em.StatusComplete, tu.HyperparameterTuningStatusCode)
	assert.Len(t, tu.TrialList, 6)
	assert.Equal(t, 6, tu.CompletedTrialCount+tu.EarlyStoppedTrialCount)
	require.NotEmpty(t, tu.BestTrainingID)
	require.NotNil(t, tu.BestObjectiveMetricValue)
	assert.Equal(t, "accuracy", tu.ObjectiveMetricName, "the algorithm's first metric is the default objective")
	assert.Equal(t, em.ObjectiveMaximize, tu.ObjectiveTypeCode)
	for _, tr := range tu.TrialList {
		if tr.TrialStatusCode != em.StatusComplete {
			continue
		}
		for _, m := range tr.MetricList {
			if m.MetricName == "accuracy" {
				assert.LessOrEqual(t, m.MetricValue, *tu.BestObjectiveMetricValue, "the best trial has the highest accuracy")
			}
		}
	}
	best, err := e.client.GetTraining(e.ctx, tu.BestTrainingID)
	require.NoError(t, err)
	assert.Equal(t, tu.HyperparameterTuningID, best.HyperparameterTuningID)
	assert.Equal(t, tu.BestHyperparameterList, best.HyperparameterList)

	listed, err := e.client.ListTrainings(e.ctx, tu.ExperimentID)
	require.NoError(t, err)
	assert.Empty(t, listed, "trials are not listed among the experiment's trainings")

	m, err := e.client.CreateModel(e.ctx, em.CreateModelRequest{ModelName: "best", HyperparameterTuningID: tu.HyperparameterTuningID})
	require.NoError(t, err)
	assert.Equal(t, tu.BestTrainingID, m.TrainingID, "a model from a tuning uses its best training")
}

func TestTuningsAreDeterministicFromTheSeed(t *testing.T) {
	run := func() *em.HyperparameterTuning {
		e := start(t)
		tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "same"})
		e.advance(time.Hour)
		tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
		require.NoError(t, err)
		return tu
	}
	a, b := run(), run()
	assert.Equal(t, a.BestHyperparameterList, b.BestHyperparameterList)
	assert.Equal(t, a.BestMetricList, b.BestMetricList)
}

func TestMedianEarlyStoppingStopsWeakTrials(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "many", ParallelTrialCount: 1, MaxTrialCount: 20,
		EarlyStoppingMinTrialCount: 2, EarlyStoppingStartStep: 3})
	e.advance(3 * time.Hour)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	require.Equal(t, em.StatusComplete, tu.HyperparameterTuningStatusCode)
	assert.Positive(t, tu.EarlyStoppedTrialCount, "some of 20 trials are worse than the median")
	assert.Equal(t, 20, tu.CompletedTrialCount+tu.EarlyStoppedTrialCount)
}

func TestGridWalksEveryCombination(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "grid", TuningStrategyName: em.StrategyGrid,
		HyperparameterSpecList: []em.HyperparameterSpec{
			{HyperparameterName: "depth", HyperparameterTypeCode: em.HyperparameterTypeInt, HyperparameterMinValue: f64(2), HyperparameterMaxValue: f64(6), HyperparameterStep: f64(2)},
			{HyperparameterName: "act", HyperparameterTypeCode: em.HyperparameterTypeDisc, HyperparameterSpecifiedValues: "relu,tanh"},
		}})
	assert.Equal(t, 6, tu.MaxTrialCount, "3 depths x 2 activations")
	e.advance(2 * time.Hour)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, tr := range tu.TrialList {
		seen[tr.HyperparameterList[0].HyperparameterValue+"/"+tr.HyperparameterList[1].HyperparameterValue] = true
	}
	assert.Len(t, seen, 6)
	assert.True(t, seen["4/tanh"])
}

func TestAnObjectiveGoalEndsTheTuningEarly(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "goal", ParallelTrialCount: 1, MaxTrialCount: 10,
		ObjectiveGoal: f64(0.1)}) // any accuracy reaches it
	e.advance(2 * time.Hour)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusComplete, tu.HyperparameterTuningStatusCode)
	assert.Len(t, tu.TrialList, 1)
}

func TestAFailingTuningEndsInFailHyperparameterTuning(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "x-fail-tune", MaxFailedTrialCount: 3})
	e.advance(time.Hour)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusFailHyperparameterTuning, tu.HyperparameterTuningStatusCode)
	assert.Equal(t, 3, tu.FailedTrialCount)
	assert.Contains(t, tu.StatusReason, "max_failed_trial_count 3")
	_, err = e.client.CreateModel(e.ctx, em.CreateModelRequest{ModelName: "m", HyperparameterTuningID: tu.HyperparameterTuningID})
	require.Error(t, err)
}

func TestStoppingATuningStopsItsTrials(t *testing.T) {
	e := start(t)
	tu := e.tuning(em.CreateTuningRequest{HyperparameterTuningName: "stop"})
	e.advance(2 * time.Minute)
	require.NoError(t, e.client.StopTuning(e.ctx, tu.HyperparameterTuningID))
	e.advance(time.Minute)
	tu, err := e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusStopped, tu.HyperparameterTuningStatusCode)
	require.Len(t, tu.TrialList, 2, "trials not started are dropped")
	for _, tr := range tu.TrialList {
		assert.Equal(t, em.StatusStopped, tr.TrialStatusCode)
	}
	e.advance(time.Hour)
	tu, err = e.client.GetTuning(e.ctx, tu.HyperparameterTuningID)
	require.NoError(t, err)
	assert.Equal(t, em.StatusStopped, tu.HyperparameterTuningStatusCode, "a stopped tuning stays stopped")
	require.NoError(t, e.client.DeleteTuning(e.ctx, tu.HyperparameterTuningID))
	_, err = e.client.GetTraining(e.ctx, tu.TrialList[0].TrainingID)
	require.Error(t, err, "trials go with their tuning")
}
