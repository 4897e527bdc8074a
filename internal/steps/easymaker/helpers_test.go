package easymaker_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/easymaker"
	_ "github.com/runbook/runbook/internal/sim/identity"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/easymaker"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// Names from the simulator's catalog.
const (
	cpuImage   = "Ubuntu 22.04 CPU TensorFlow Training"
	cpuFlavor  = "c2.c4m8"
	bigFlavor  = "c2.c8m16"
	obsPrefix  = "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml"
	simSpeed   = 6000
	fastPoll   = "1s"
	classifier = "Image Classification"
)

func desc(t testing.TB, typ string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(typ)
	require.True(t, ok, "step type %s is registered", typ)
	return d
}

// mlSim is the AI EasyMaker simulator over loopback with a fast clock.
type mlSim struct {
	t    *testing.T
	srv  *sim.Server
	conn map[string]any
}

func startSim(t *testing.T) *mlSim {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "easymaker"}, Speed: simSpeed,
		Start: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return &mlSim{t: t, srv: srv, conn: srv.Connections()["easymaker"]}
}

// call builds a call of typ whose "easymaker" connection is the simulator.
func (s *mlSim) call(typ string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	s.t.Helper()
	d := desc(s.t, typ)
	c := stepstest.NewCall(s.t, d, with)
	stepstest.HostOf(c).Connections["easymaker"] = s.conn
	return d, c
}

func (s *mlSim) run(typ string, with map[string]any) steps.Outputs {
	s.t.Helper()
	out, err := s.try(typ, with)
	require.NoError(s.t, err, "%s", typ)
	return out
}

func (s *mlSim) try(typ string, with map[string]any) (steps.Outputs, error) {
	s.t.Helper()
	d, c := s.call(typ, with)
	return d.Run(context.Background(), c)
}

// posts counts the create requests the simulator received below path
// (e.g. "/experiments"), whatever the appkey.
func (s *mlSim) posts(collection string) int {
	n := 0
	for _, c := range s.srv.Journal.Calls("easymaker", http.MethodPost, "") {
		if hasSuffixPath(c.Path, collection) {
			n++
		}
	}
	return n
}

// mutations counts every POST, PUT and DELETE the simulator received.
func (s *mlSim) mutations() int {
	n := 0
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		for _, c := range s.srv.Journal.Calls("easymaker", m, "") {
			if c.Path != "/oauth2/token/create" {
				n++
			}
		}
	}
	return n
}

func hasSuffixPath(p, collection string) bool {
	return len(p) >= len(collection) && p[len(p)-len(collection):] == collection
}

// with merges maps (later wins).
func with(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

var fast = map[string]any{"poll_interval": fastPoll, "timeout": "2m"}

func (s *mlSim) experiment(name string) string {
	s.t.Helper()
	out := s.run("easymaker.experiment.create", with(fast, map[string]any{"experiment_name": name}))
	return out["experiment_id"].(string)
}

func trainingWith(exp, name string) map[string]any {
	return with(fast, map[string]any{
		"experiment_id": exp, "training_name": name, "train_image_name": cpuImage, "train_instance_name": cpuFlavor,
		"distributed_node_count": 1, "algorithm_name": classifier, "model_upload_uri": obsPrefix + "/models/" + name,
		"hyperparameter_list": []any{map[string]any{"hyperparameterKey": "epochs", "hyperparameterValue": "10"}},
	})
}

func tuningWith(exp, name string) map[string]any {
	return with(fast, map[string]any{
		"experiment_id": exp, "hyperparameter_tuning_name": name, "image_name": cpuImage, "instance_name": cpuFlavor,
		"parallel_trial_count": 2, "source_dir_uri": obsPrefix + "/src", "entry_point": "train.py", "data_storage_size": 300,
		"model_upload_uri": obsPrefix + "/models/" + name,
		"dataset_list":     []any{map[string]any{"datasetName": "train", "dataUri": obsPrefix + "/dataset"}},
		"hyperparameter_spec_list": []any{
			map[string]any{"hyperparameterName": "learning_rate", "hyperparameterTypeCode": "DOUBLE", "hyperparameterMinValue": 0.001, "hyperparameterMaxValue": 0.1},
			map[string]any{"hyperparameterName": "optimizer", "hyperparameterTypeCode": "CATEGORICAL", "hyperparameterSpecifiedValues": "adam,sgd"},
		},
		"metric_list": []any{"val_loss", "accuracy"}, "objective_metric_name": "val_loss", "objective_type_code": "MINIMIZE",
		"max_trial_count": 4, "tuning_strategy_name": "BAYESIAN_OPTIMIZATION", "early_stopping_algorithm": "MEDIAN",
	})
}
