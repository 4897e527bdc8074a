package easymaker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

type checkpoint struct {
	Phase    string         `json:"phase"`
	ID       string         `json:"id"`
	Outputs  map[string]any `json:"outputs"`
	Deadline time.Time      `json:"deadline"`
}

func lastCheckpoint(t *testing.T, c *steps.Call) checkpoint {
	t.Helper()
	var cp checkpoint
	require.NoError(t, json.Unmarshal(stepstest.HostOf(c).LastCheckpoint(), &cp))
	return cp
}

func TestAnInterruptedWaitResumesOnTheSameResourceUntilTheSameDeadline(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	w := with(trainingWith(exp, "resumed"), map[string]any{"poll_interval": "5s", "timeout": "1h"})

	d, c := s.call("easymaker.training.run", w)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := d.Run(ctx, c)
	require.Error(t, err, "interrupted mid-wait")
	assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	cp := lastCheckpoint(t, c)
	assert.Equal(t, "called", cp.Phase)
	require.NotEmpty(t, cp.ID, "the ID waited on is persisted before the wait")
	assert.WithinDuration(t, time.Now().Add(time.Hour), cp.Deadline, time.Minute)

	// The next attempt (or a resumed process) gets the checkpoint back.
	d, c2 := s.call("easymaker.training.run", with(w, map[string]any{"poll_interval": "1s"}))
	c2.Resume = stepstest.HostOf(c).LastCheckpoint()
	out, err := d.Run(context.Background(), c2)
	require.NoError(t, err)
	assert.Equal(t, cp.ID, out["training_id"])
	assert.Equal(t, "COMPLETE", out["status"])
	assert.Equal(t, 1, s.posts("/trainings"), "no second training was created")

	t.Run("a passed deadline is kept", func(t *testing.T) {
		late := cp
		late.Deadline = time.Now().Add(-time.Minute)
		b, err := json.Marshal(late)
		require.NoError(t, err)
		d, c3 := s.call("easymaker.training.run", trainingWith(exp, "other"))
		c3.Resume = b
		// COMPLETE already: a done resource ends the wait even past the deadline.
		out, err := d.Run(context.Background(), c3)
		require.NoError(t, err)
		assert.Equal(t, cp.ID, out["training_id"])
	})
}

func TestAWaitThatOutlivesItsTimeoutFailsWithTimeout(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	// 50 trials one at a time take hours of simulated time (a second here);
	// the injected clock passes the deadline after the first read.
	d, c := s.call("easymaker.tuning.run", with(tuningWith(exp, "slow"), map[string]any{"timeout": "1s", "max_trial_count": 50, "parallel_trial_count": 1}))
	start, reads := time.Now(), 0
	c.Now = func() time.Time { // the deadline is set at the first read; every later read is an hour on
		reads++
		if reads == 1 {
			return start
		}
		return start.Add(time.Hour)
	}
	_, err := d.Run(context.Background(), c)
	require.Error(t, err)
	assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "deadline")
}

func TestReconcileAdoptsWhatAnInterruptedCreateMade(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")

	cases := []struct {
		typ, idKey string
		with       map[string]any
		collection string
	}{
		{"easymaker.training.run", "training_id", trainingWith(exp, "adopt-me"), "/trainings"},
		{"easymaker.tuning.run", "hyperparameter_tuning_id", tuningWith(exp, "adopt-tune"), "/hyperparameter-tunings"},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			first := s.run(tc.typ, with(tc.with, map[string]any{"wait": false}))
			d, c := s.call(tc.typ, tc.with)
			c.Resume = []byte(`{"phase":"calling"}`)
			out, found, err := d.Reconcile(context.Background(), c, steps.Intent{})
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, first[tc.idKey], out[tc.idKey])
			assert.Equal(t, true, out["adopted"])
			assert.Equal(t, "COMPLETE", out["status"], "the adopted resource is waited on as the step would have")
			assert.Equal(t, 1, s.posts(tc.collection), "nothing was created twice")
		})
	}

	t.Run("nothing of the name: the step runs again", func(t *testing.T) {
		d, c := s.call("easymaker.training.run", trainingWith(exp, "never-sent"))
		c.Resume = []byte(`{"phase":"calling"}`)
		_, found, err := d.Reconcile(context.Background(), c, steps.Intent{})
		require.NoError(t, err)
		assert.False(t, found)
	})
	t.Run("no checkpoint: the request was never sent, nothing is looked up", func(t *testing.T) {
		s.srv.Journal.Reset()
		d, c := s.call("easymaker.training.run", trainingWith(exp, "adopt-me"))
		_, found, err := d.Reconcile(context.Background(), c, steps.Intent{})
		require.NoError(t, err)
		assert.False(t, found)
		assert.Empty(t, s.srv.Journal.Calls("easymaker", "", ""))
	})
}

func TestReconcileAdoptsModelsEndpointsAndStagesByName(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	trn := s.run("easymaker.training.run", trainingWith(exp, "t"))
	model := s.run("easymaker.model.create", with(fast, map[string]any{"training_id": trn["training_id"], "model_name": "m"}))

	reconcile := func(typ string, w map[string]any) steps.Outputs {
		t.Helper()
		d, c := s.call(typ, w)
		c.Resume = []byte(`{"phase":"calling"}`)
		out, found, err := d.Reconcile(context.Background(), c, steps.Intent{})
		require.NoError(t, err)
		require.True(t, found, typ)
		assert.Equal(t, true, out["adopted"])
		return out
	}
	m := reconcile("easymaker.model.create", with(fast, map[string]any{"training_id": trn["training_id"], "model_name": "m"}))
	assert.Equal(t, model["model_id"], m["model_id"])
	assert.Equal(t, 1, s.posts("/models"))

	resources := []any{map[string]any{"modelId": model["model_id"], "apigwResourceUri": "/p", "podCount": 1}}
	epWith := with(fast, map[string]any{"endpoint_name": "ep", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": resources})
	ep := s.run("easymaker.endpoint.create", with(epWith, map[string]any{"wait": false}))
	got := reconcile("easymaker.endpoint.create", epWith)
	assert.Equal(t, ep["endpoint_id"], got["endpoint_id"])
	assert.Equal(t, "ACTIVE", got["stage_status"], "the adopted endpoint's default stage is waited for")
	assert.Equal(t, 1, s.posts("/endpoints"))

	stWith := with(fast, map[string]any{"endpoint_id": ep["endpoint_id"], "stage_name": "blue", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": resources})
	st := s.run("easymaker.endpoint.create_stage", stWith)
	got = reconcile("easymaker.endpoint.create_stage", stWith)
	assert.Equal(t, st["endpoint_stage_id"], got["endpoint_stage_id"])
	assert.Equal(t, 1, s.posts("/endpoint-stages"))
}

func TestCancellingAWaitReturnsPromptly(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	d, c := s.call("easymaker.tuning.run", with(tuningWith(exp, "long"), map[string]any{"max_trial_count": 50, "parallel_trial_count": 1, "poll_interval": "10s"}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := d.Run(ctx, c); done <- err }()
	time.Sleep(300 * time.Millisecond)
	at := time.Now()
	cancel()
	select {
	case err := <-done:
		assert.Less(t, time.Since(at), stepstest.Prompt)
		assert.Equal(t, fault.Cancelled, fault.CodeOf(err), "error: %v", err)
	case <-time.After(stepstest.Prompt + time.Second):
		t.Fatal("the wait did not end on cancel")
	}
	assert.Equal(t, "called", lastCheckpoint(t, c).Phase, "the tuning's ID stays persisted for the next attempt")
}
