package easymaker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	simem "github.com/runbook/runbook/internal/sim/easymaker"
)

func TestTuneRegisterDeployAndPredictAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	s := startSim(t)

	exp := s.experiment("churn")
	require.NotEmpty(t, exp)

	tune := s.run("easymaker.tuning.run", tuningWith(exp, "churn-tune"))
	assert.Equal(t, "COMPLETE", tune["status"])
	assert.Equal(t, false, tune["adopted"])
	best, _ := tune["best_training_id"].(string)
	require.NotEmpty(t, best, "a COMPLETE tuning names its best training")
	assert.Contains(t, tune["best_metrics"], "val_loss", "the best training's metrics are outputs")
	assert.NotNil(t, tune["best_objective_metric_value"])

	model := s.run("easymaker.model.create", with(fast, map[string]any{
		"hyperparameter_tuning_id": tune["hyperparameter_tuning_id"], "model_name": "churn-model"}))
	assert.Equal(t, "ACTIVE", model["status"])
	modelID := model["model_id"].(string)

	resources := []any{map[string]any{"modelId": modelID, "apigwResourceUri": "/predict", "podCount": 1}}
	ep := s.run("easymaker.endpoint.create", with(fast, map[string]any{
		"endpoint_name": "churn", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": resources}))
	assert.Equal(t, "ACTIVE", ep["status"])
	assert.Equal(t, "ACTIVE", ep["stage_status"], "endpoint create waits for its default stage too")
	assert.NotEmpty(t, ep["apigw_stage_url"])
	endpointID := ep["endpoint_id"].(string)

	stage := s.run("easymaker.endpoint.create_stage", with(fast, map[string]any{
		"endpoint_id": endpointID, "stage_name": "canary", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": resources}))
	assert.Equal(t, "ACTIVE", stage["status"])
	assert.Equal(t, false, stage["default_stage"])
	assert.NotEmpty(t, stage["apigw_stage_url"])
	stageID := stage["endpoint_stage_id"].(string)

	def := s.run("easymaker.endpoint.default_stage", map[string]any{"endpoint_id": endpointID})
	assert.Equal(t, ep["default_stage_id"], def["endpoint_stage_id"])
	assert.Equal(t, true, def["default_stage"])
	got := s.run("easymaker.endpoint.stage", map[string]any{"endpoint_stage_id": stageID})
	assert.Equal(t, "canary", got["stage_name"])

	payload := map[string]any{"instances": []any{[]any{0.2, 1.5, 3.0}, []any{1.0, 0.0, 2.0}}}
	pred := s.run("easymaker.endpoint.predict", map[string]any{"endpoint_id": endpointID, "json": payload})
	answer, ok := pred["predictions"].(map[string]any)
	require.True(t, ok, "the raw JSON answer: %v", pred["predictions"])
	assert.Len(t, answer["predictions"], 2, "one prediction per instance")
	assert.Equal(t, modelID, pred["model_id"], "the stage's only model is used when model_id is left out")
	pred2 := s.run("easymaker.endpoint.predict", map[string]any{"endpoint_stage_id": stageID, "model_id": modelID, "json": payload})
	assert.Equal(t, answer, pred2["predictions"], "the canary serves the same model")

	for what, name := range map[string]string{"experiments": "churn", "models": "churn-model", "endpoints": "churn",
		"instances": cpuFlavor, "images": cpuImage, "algorithms": classifier, "tunings": "churn-tune"} {
		out := s.run("easymaker.list", map[string]any{"what": what})
		assert.Contains(t, out["names"], name, "list %s", what)
		assert.Equal(t, len(out["items"].([]any)), out["count"])
	}
	trials := s.run("easymaker.list", map[string]any{"what": "trainings", "experiment_id": exp})
	assert.GreaterOrEqual(t, trials["count"], 0)

	del := s.run("easymaker.endpoint.delete_stage", map[string]any{"stage_id": stageID})
	assert.Equal(t, true, del["deleted"])
	del = s.run("easymaker.endpoint.delete", map[string]any{"endpoint_id": endpointID})
	assert.Equal(t, true, del["deleted"])
	again := s.run("easymaker.endpoint.delete", map[string]any{"endpoint_id": endpointID})
	assert.Equal(t, false, again["deleted"], "a delete of what is gone is done")
	assert.Equal(t, true, s.run("easymaker.model.delete", map[string]any{"model_id": modelID})["deleted"])
	assert.Equal(t, true, s.run("easymaker.tuning.delete", map[string]any{"hyperparameter_tuning_id": tune["hyperparameter_tuning_id"]})["deleted"])
	assert.Equal(t, false, s.run("easymaker.training.delete", map[string]any{"training_id": "trn-gone"})["deleted"])
	assert.Equal(t, false, s.run("easymaker.batch_inference.delete", map[string]any{"batch_inference_id": "bi-gone"})["deleted"])
}

func TestAnExperimentOfAnExistingNameIsAdopted(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	first := s.run("easymaker.experiment.create", with(fast, map[string]any{"experiment_name": "shared"}))
	second := s.run("easymaker.experiment.create", with(fast, map[string]any{"experiment_name": "shared"}))
	assert.Equal(t, first["experiment_id"], second["experiment_id"])
	assert.Equal(t, true, second["adopted"])
	assert.Equal(t, "ACTIVE", second["status"])
	assert.Equal(t, 1, s.posts("/experiments"), "the second create sent no request")
}

func TestATrainingRunsToCompleteWithItsMetrics(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	out := s.run("easymaker.training.run", trainingWith(exp, "t1"))
	assert.Equal(t, "COMPLETE", out["status"])
	assert.NotEmpty(t, out["metrics"])
	assert.Equal(t, exp, out["experiment_id"])

	out = s.run("easymaker.training.run", with(trainingWith(exp, "t2"), map[string]any{"wait": false}))
	assert.NotEqual(t, "COMPLETE", out["status"], "wait: false returns right after the create request")
	assert.NotEmpty(t, out["training_id"])
}

func TestAWaitFailsAtOnceWithTheStatusAndReason(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	start := time.Now()
	_, err := s.try("easymaker.training.run", trainingWith(exp, "fail-train-1"))
	// The simulated training fails 2 m after it starts running: 20 ms of
	// real time at 6000x. A wait that missed the FAIL status would poll on
	// until its 2 m timeout.
	assert.Less(t, time.Since(start), 5*time.Second, "the wait stops at the first FAIL status")
	require.Error(t, err)
	assert.Equal(t, fault.Failed, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "FAIL_TRAIN")
	var se *fault.Error
	require.ErrorAs(t, err, &se)
	assert.NotEmpty(t, se.Data["reason"], "the training's statusReason is in the error")
	assert.Contains(t, err.Error(), se.Data["reason"])
}

func TestABatchInferenceWithoutInputFails(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	trn := s.run("easymaker.training.run", trainingWith(exp, "t"))
	s.run("easymaker.model.create", with(fast, map[string]any{"training_id": trn["training_id"], "model_name": "m"}))
	_, err := s.try("easymaker.batch_inference.run", with(fast, map[string]any{
		"batch_inference_name": "b", "instance_count": 1, "instance_name": cpuFlavor, "model_name": "m",
		"pod_count": 1, "batch_size": 10, "inference_timeout_seconds": 60,
		"input_data_uri": obsPrefix + "/missing/", "input_data_type": "JSONL",
		"output_upload_uri": obsPrefix + "/out/", "data_storage_size": 300}))
	require.Error(t, err)
	assert.Equal(t, fault.Failed, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "FAIL_BATCH_INFERENCE")
}

func TestUnknownNamesAreRefusedWithTheChoices(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	exp := s.experiment("e")
	_, err := s.try("easymaker.training.run", with(trainingWith(exp, "t"), map[string]any{"train_instance_name": "huge"}))
	require.Error(t, err)
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "train_instance_name")
	assert.Contains(t, err.Error(), cpuFlavor, "the error lists the valid choices")
	assert.Zero(t, s.posts("/trainings"))
}

// TestModelFromURIBatchInferenceAndDeletes runs the steps the deploy test
// leaves out over real HTTP: a model from a URI, a batch inference that
// reads JSONL from (simulated) object storage and writes its predictions
// there, and the deletes of resources that exist.
func TestModelFromURIBatchInferenceAndDeletes(t *testing.T) {
	t.Parallel()
	s := startSim(t)
	objects := s.srv.Service("easymaker").(*simem.Service).Objects()
	objects.Put("AUTH_tenant", "ml", "batch/in/rows.jsonl", []byte("[0.5, 1.0]\n[2.0, 0.0]\n[1.0, 1.0]\n"), "")

	model := s.run("easymaker.model.create_from_uri", with(fast, map[string]any{
		"framework_code": "PYTORCH", "model_uri": obsPrefix + "/models/external", "model_name": "external"}))
	assert.Equal(t, "ACTIVE", model["status"])

	batch := s.run("easymaker.batch_inference.run", with(fast, map[string]any{
		"batch_inference_name": "nightly", "instance_count": 1, "instance_name": cpuFlavor, "model_name": "external",
		"pod_count": 1, "batch_size": 10, "inference_timeout_seconds": 60,
		"input_data_uri": obsPrefix + "/batch/in/", "input_data_type": "JSONL",
		"output_upload_uri": obsPrefix + "/batch/out/", "data_storage_size": 300}))
	assert.Equal(t, "COMPLETE", batch["status"])
	assert.Equal(t, model["model_id"], batch["model_id"], "model_name resolved to the model's ID")
	assert.EqualValues(t, 1, batch["input_file_count"])
	assert.EqualValues(t, 3, batch["inference_count"])
	out, ok := objects.Get("AUTH_tenant", "ml", "batch/out/rows.jsonl.out")
	require.True(t, ok, "the predictions are written under output_upload_uri: %v", batch["output_files"])
	assert.Len(t, strings.Split(strings.TrimSpace(string(out)), "\n"), 3, "one line per input line")

	exp := s.experiment("scratch")
	trn := s.run("easymaker.training.run", trainingWith(exp, "once"))
	for typ, with := range map[string]map[string]any{
		"easymaker.batch_inference.delete": {"batch_inference_id": batch["batch_inference_id"]},
		"easymaker.training.delete":        {"training_id": trn["training_id"]},
		"easymaker.model.delete":           {"model_id": model["model_id"]},
	} {
		assert.Equal(t, true, s.run(typ, with)["deleted"], typ)
	}
	assert.Equal(t, true, s.run("easymaker.experiment.delete", map[string]any{"experiment_id": exp})["deleted"],
		"an experiment whose trainings are deleted can go")
	assert.Equal(t, false, s.run("easymaker.experiment.delete", map[string]any{"experiment_id": exp})["deleted"])
	list := s.run("easymaker.list", map[string]any{"what": "experiments"})
	assert.NotContains(t, list["names"], "scratch")
}
