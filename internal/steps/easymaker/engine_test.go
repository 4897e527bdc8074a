package easymaker_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/logncrash"
	_ "github.com/runbook/runbook/internal/sim/objectstorage"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/core"
	_ "github.com/runbook/runbook/internal/steps/logncrash"
	_ "github.com/runbook/runbook/internal/steps/objectstorage"
)

type testEngine struct {
	*engine.Engine
	store *bolt.Store
}

// newEngine runs playbooks with the simulator's connections.
func newEngine(t *testing.T, srv *sim.Server) *testEngine {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	src, err := secrets.NewSource(nil, "")
	require.NoError(t, err)
	e := engine.New(engine.Options{
		Store: st, Secrets: src, Redactor: secrets.NewRedactor(), Environ: []string{},
		Connection: func(name string, _ map[string]any) (map[string]any, error) {
			conn, ok := srv.Connections()[name]
			if !ok {
				return nil, &fault.Error{Code: fault.Invalid, Message: "no connection " + name}
			}
			return conn, nil
		},
		Playbooks: engine.Playbooks{Parse: func(file string, src []byte) (*playbook.Playbook, error) {
			return playbook.Parse(file, src, playbook.LoadOptions{})
		}},
	})
	return &testEngine{Engine: e, store: st}
}

func (e *testEngine) step(t *testing.T, runID, id string) *state.StepRecord {
	t.Helper()
	recs, err := e.store.Steps(context.Background(), runID)
	require.NoError(t, err)
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no step %s in run %s", id, runID)
	return nil
}

func loadBook(t *testing.T, path string) *playbook.Playbook {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	pb, err := playbook.Parse(path, src, playbook.LoadOptions{})
	require.NoError(t, err)
	return pb
}

func TestTheTuneAndDeployExampleRunsOnTheSimulator(t *testing.T) {
	t.Parallel()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "easymaker", "objectstorage", "logncrash"}, Speed: simSpeed})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	s := &mlSim{t: t, srv: srv, conn: srv.Connections()["easymaker"]}
	e := newEngine(t, srv)
	pb := loadBook(t, filepath.Join("..", "..", "..", "examples", "ml-tune-and-deploy.yaml"))

	run, err := e.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Equal(t, state.RunSucceeded, run.Status)

	out := run.Outputs
	for _, k := range []string{"experiment_id", "hyperparameter_tuning_id", "best_training_id", "model_id", "endpoint_id", "stage_url", "canary_stage_id", "canary_url"} {
		assert.NotEmpty(t, out[k], "output %s", k)
	}
	assert.Contains(t, out["best_metrics"], "val_loss")
	pred, ok := out["predictions"].(map[string]any)
	require.True(t, ok, "predictions: %v", out["predictions"])
	assert.Len(t, pred["predictions"], 1)

	for _, c := range []string{"/experiments", "/hyperparameter-tunings", "/models", "/endpoints", "/endpoint-stages"} {
		assert.Equal(t, 1, s.posts(c), "one create of %s", c)
	}
	tune := e.step(t, run.ID, "tune")
	assert.Equal(t, "COMPLETE", tune.Outputs["status"])

	assert.Equal(t, "succeeded", string(e.step(t, run.ID, "upload").Status), "the dataset was uploaded")
	assert.Equal(t, "succeeded", string(e.step(t, run.ID, "notify").Status), "the log line was sent")
	assert.Len(t, srv.Journal.Calls("logncrash", "POST", ""), 1)
}

func TestTheTuneAndDeployPlaybookLoads(t *testing.T) {
	pb := loadBook(t, filepath.Join("..", "..", "..", "playbooks", "ml-tune-and-deploy.yaml"))
	assert.Equal(t, "ml-tune-and-deploy", pb.Name)
}

const computedBook = `version: 1
name: computed
inputs:
  case: {type: string, default: ""}
  text: {type: string, default: ""}
  num: {type: integer, default: 0}
  list: {type: list, default: []}
steps:
  - id: experiment
    uses: easymaker.experiment.create
    if: ${{ inputs.case == "experiment_name" }}
    with:
      experiment_name: ${{ inputs.text }}
  - id: training
    uses: easymaker.training.run
    if: ${{ inputs.case == "timeout_hours" || inputs.case == "storage" }}
    with:
      experiment_id: exp-1
      training_name: t
      train_image_name: img
      train_instance_name: c2.c4m8
      distributed_node_count: 1
      source_dir_uri: '${{ inputs.case == "storage" ? inputs.text : "nas://share/src" }}'
      entry_point: train.py
      model_upload_uri: nas://share/model
      timeout_hours: '${{ inputs.case == "timeout_hours" ? inputs.num : 720 }}'
  - id: tuning
    uses: easymaker.tuning.run
    if: ${{ inputs.case == "parallel_trial_count" || inputs.case == "spec" || inputs.case == "dataset" }}
    with:
      experiment_id: exp-1
      hyperparameter_tuning_name: tune
      image_name: img
      instance_name: c2.c4m8
      distributed_node_count: 4
      parallel_trial_count: '${{ inputs.case == "parallel_trial_count" ? inputs.num : 1 }}'
      algorithm_name: Image Classification
      model_upload_uri: nas://share/model
      tuning_strategy_name: GRID
      early_stopping_algorithm: MEDIAN
      hyperparameter_spec_list: '${{ inputs.case == "spec" ? inputs.list : [] }}'
      dataset_list:
        - {datasetName: train, dataUri: '${{ inputs.case == "dataset" ? nil : "nas://share/data" }}'}
  - id: endpoint
    uses: easymaker.endpoint.create
    if: ${{ inputs.case == "resources" }}
    with:
      endpoint_name: ep
      endpoint_instance_name: c2.c8m16
      endpoint_model_resource_list: ${{ inputs.list }}
  - id: batch
    uses: easymaker.batch_inference.run
    if: ${{ inputs.case == "batch_size" }}
    with:
      batch_inference_name: b
      instance_count: 1
      instance_name: c2.c4m8
      model_name: m
      pod_count: 1
      batch_size: ${{ inputs.num }}
      inference_timeout_seconds: 60
      input_data_uri: obs://h/v1/AUTH_t/c/in
      input_data_type: JSON
      output_upload_uri: obs://h/v1/AUTH_t/c/out
      data_storage_size: 300
`

func TestComputedValuesBreakingALimitFailTheStepBeforeAnyCall(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	e := newEngine(t, s.srv)
	pb, err := playbook.Parse("computed.yaml", []byte(computedBook), playbook.LoadOptions{})
	require.NoError(t, err, "values from expressions are not judged at load time")
	cases := []struct {
		name, kase string
		value      any
		step, want string
	}{
		{"a 51-character experiment name", "experiment_name", "e123456789e123456789e123456789e123456789e123456789x", "experiment", "experiment_name: must be at most 50 characters (got 51)"},
		{"timeout_hours 721", "timeout_hours", 721, "training", "timeout_hours: must be between 1 and 720"},
		{"object storage without data_storage_size", "storage", "obs://h/v1/AUTH_t/c/src", "training", "data_storage_size: is required"},
		{"4 nodes x 3 trials", "parallel_trial_count", 3, "tuning", "parallel_trial_count: distributed_node_count x parallel_trial_count must be at most 10 (got 4 x 3 = 12)"},
		{"a GRID spec without a step", "spec", []any{map[string]any{"hyperparameterName": "lr", "hyperparameterTypeCode": "DOUBLE", "hyperparameterMinValue": 0.1, "hyperparameterMaxValue": 0.5}}, "tuning", "hyperparameter_spec_list[0].hyperparameterStep: is required for type DOUBLE with the GRID strategy"},
		{"a resource URI without /", "resources", []any{map[string]any{"modelId": "m", "apigwResourceUri": "predict", "podCount": 1}}, "endpoint", "endpoint_model_resource_list[0].apigwResourceUri: must match ^/"},
		{"a dataset without its path", "dataset", nil, "tuning", "dataset_list[0].dataUri: is required"},
		{"batch_size 1001", "batch_size", 1001, "batch", "batch_size: must be between 1 and 1000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.srv.Journal.Reset()
			run, err := e.Run(context.Background(), pb, engine.StartRequest{Inputs: inputsFor(tc.kase, tc.value)})
			require.Error(t, err)
			require.NotNil(t, run)
			assert.Equal(t, state.RunFailed, run.Status)
			rec := e.step(t, run.ID, tc.step)
			require.NotNil(t, rec.Error, "step %s failed (run: %v)", tc.step, err)
			assert.Contains(t, rec.Error.Message, tc.want)
			assert.Equal(t, string(fault.Invalid), rec.Error.Code)
			assert.Empty(t, s.srv.Journal.Calls("easymaker", "", ""), "no call reached the service")
		})
	}
}

// inputsFor puts value in the input of its type.
func inputsFor(kase string, value any) map[string]any {
	in := map[string]any{"case": kase}
	switch v := value.(type) {
	case string:
		in["text"] = v
	case int:
		in["num"] = v
	case []any:
		in["list"] = v
	}
	return in
}

// TestEveryLimitOfTheSpecFailsAComputedValueBeforeAnyCall runs each limit
// case of the load-time test with the offending param computed by an
// expression (an input of the value's type, or nil for a missing one):
// the playbook loads, and the step fails invalid with the same finding
// before any call reaches the service.
func TestEveryLimitOfTheSpecFailsAComputedValueBeforeAnyCall(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	e := newEngine(t, s.srv)
	for _, tc := range limitCases {
		t.Run(tc.name, func(t *testing.T) {
			top := regexp.MustCompile(`^[a-z_]+`).FindString(tc.path)
			w, inputs := with(tc.with), map[string]any{}
			inputType := ""
			if v, ok := w[top]; ok {
				switch v.(type) {
				case string:
					inputType = "string"
				case int:
					inputType = "integer"
				case float64:
					inputType = "number"
				case bool:
					inputType = "boolean"
				case []any:
					inputType = "list"
				case map[string]any:
					inputType = "map"
				default:
					t.Fatalf("no input type for %T", v)
				}
				w[top], inputs["v"] = "${{ inputs.v }}", v
			} else {
				w[top] = "${{ nil }}"
			}
			src := bookOf(t, tc.typ, w)
			if inputType != "" {
				src = strings.Replace(src, "name: limits\n", "name: limits\ninputs:\n  v: {type: "+inputType+"}\n", 1)
			}
			pb, err := playbook.Parse("computed.yaml", []byte(src), playbook.LoadOptions{})
			require.NoError(t, err, "a computed value is not judged at load time:\n%s", src)
			before := len(s.srv.Journal.Calls("easymaker", "", ""))
			run, err := e.Run(context.Background(), pb, engine.StartRequest{Inputs: inputs})
			require.Error(t, err)
			require.NotNil(t, run)
			rec := e.step(t, run.ID, "s")
			require.NotNil(t, rec.Error)
			assert.Equal(t, string(fault.Invalid), rec.Error.Code)
			assert.Contains(t, rec.Error.Message, tc.path+": ")
			assert.Contains(t, rec.Error.Message, tc.want)
			assert.Len(t, s.srv.Journal.Calls("easymaker", "", ""), before, "no call reached the service")
		})
	}
}
