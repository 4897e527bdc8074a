package easymaker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// set returns a copy of m with key set to v (nil deletes it).
func set(m map[string]any, kv ...any) map[string]any {
	out := with(m)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func many(n int, f func(i int) any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func spec(kv ...any) []any {
	m := map[string]any{"hyperparameterName": "x"}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return []any{m}
}

var (
	long51   = strings.Repeat("n", 51)
	long256  = strings.Repeat("d", 256)
	tag      = map[string]any{"tagKey": "k", "tagValue": "v"}
	resource = map[string]any{"modelId": "mdl-1", "apigwResourceUri": "/predict", "podCount": 1}
	nasData  = []any{map[string]any{"datasetName": "train", "dataUri": "nas://share/data"}}

	experimentOK = map[string]any{"experiment_name": "e"}
	trainingOK   = trainingWith("exp-1", "t")
	ownTraining  = set(trainingOK, "algorithm_name", nil, "source_dir_uri", obsPrefix+"/src", "entry_point", "train.py", "data_storage_size", 300)
	tuningOK     = tuningWith("exp-1", "tune")
	modelOK      = map[string]any{"training_id": "trn-1", "model_name": "m"}
	uriModelOK   = map[string]any{"framework_code": "PYTORCH", "model_uri": obsPrefix + "/model", "model_name": "m"}
	endpointOK   = map[string]any{"endpoint_name": "ep", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": []any{resource}}
	stageOK      = map[string]any{"endpoint_id": "ep-1", "stage_name": "canary", "endpoint_instance_name": bigFlavor, "endpoint_model_resource_list": []any{resource}}
	batchOK      = map[string]any{"batch_inference_name": "b", "instance_count": 1, "instance_name": cpuFlavor, "model_name": "m",
		"pod_count": 1, "batch_size": 10, "inference_timeout_seconds": 60, "input_data_uri": obsPrefix + "/in/", "input_data_type": "JSONL",
		"output_upload_uri": obsPrefix + "/out/", "data_storage_size": 300}
)

// limitCases break one limit of the spec's tables each: path is where the
// diagnostic must point, want a part of its message.
var limitCases = []struct {
	name, typ string
	with      map[string]any
	path      string
	want      string
}{
	{"experiment name up to 50", "easymaker.experiment.create", set(experimentOK, "experiment_name", long51), "experiment_name", "at most 50"},
	{"experiment description up to 255", "easymaker.experiment.create", set(experimentOK, "experiment_description", long256), "experiment_description", "at most 255"},
	{"tag_list up to 10", "easymaker.experiment.create", set(experimentOK, "tag_list", many(11, func(int) any { return tag })), "tag_list", "at most 10"},
	{"tagKey up to 64", "easymaker.experiment.create", set(experimentOK, "tag_list", []any{map[string]any{"tagKey": strings.Repeat("k", 65)}}), "tag_list[0].tagKey", "at most 64"},
	{"tagValue up to 255", "easymaker.experiment.create", set(experimentOK, "tag_list", []any{map[string]any{"tagKey": "k", "tagValue": long256}}), "tag_list[0].tagValue", "at most 255"},
	{"poll_interval at least 1s", "easymaker.experiment.create", set(experimentOK, "poll_interval", "500ms"), "poll_interval", "between 1s"},
	{"experiment ID up to 36", "easymaker.experiment.delete", map[string]any{"experiment_id": strings.Repeat("i", 37)}, "experiment_id", "at most 36"},

	{"training name up to 50", "easymaker.training.run", set(trainingOK, "training_name", long51), "training_name", "at most 50"},
	{"training description up to 255", "easymaker.training.run", set(trainingOK, "training_description", long256), "training_description", "at most 255"},
	{"timeout_hours at least 1", "easymaker.training.run", set(trainingOK, "timeout_hours", 0), "timeout_hours", "between 1 and 720"},
	{"timeout_hours at most 720", "easymaker.training.run", set(trainingOK, "timeout_hours", 721), "timeout_hours", "between 1 and 720"},
	{"data_storage_size at least 300", "easymaker.training.run", set(trainingOK, "data_storage_size", 299), "data_storage_size", "between 300 and 10000"},
	{"data_storage_size at most 10000", "easymaker.training.run", set(trainingOK, "data_storage_size", 10001), "data_storage_size", "between 300 and 10000"},
	{"data_storage_size required with object storage", "easymaker.training.run", set(ownTraining, "data_storage_size", nil), "data_storage_size", "is required (300 to 10000 GB) when data comes from object storage"},
	{"distributed_node_count at most 10", "easymaker.training.run", set(trainingOK, "distributed_node_count", 11), "distributed_node_count", "between 1 and 10"},
	{"distributed_node_count at least 1", "easymaker.training.run", set(trainingOK, "distributed_node_count", 0), "distributed_node_count", "between 1 and 10"},
	{"nproc_per_node only with use_torchrun", "easymaker.training.run", set(trainingOK, "nproc_per_node", 2), "nproc_per_node", "only used with use_torchrun"},
	{"a provided and an own algorithm are exclusive", "easymaker.training.run", set(trainingOK, "source_dir_uri", obsPrefix+"/src", "entry_point", "t.py", "data_storage_size", 300), "algorithm_name", "not both"},
	{"an algorithm is required", "easymaker.training.run", set(trainingOK, "algorithm_name", nil), "algorithm_name", "is required unless an own algorithm"},
	{"an own algorithm needs entry_point", "easymaker.training.run", set(ownTraining, "entry_point", nil), "entry_point", "is required with source_dir_uri"},
	{"algorithm name up to 64", "easymaker.training.run", set(trainingOK, "algorithm_name", strings.Repeat("a", 65)), "algorithm_name", "at most 64"},
	{"source_dir_uri up to 255", "easymaker.training.run", set(ownTraining, "source_dir_uri", "obs://"+long256), "source_dir_uri", "at most 255"},
	{"entry_point up to 255", "easymaker.training.run", set(ownTraining, "entry_point", long256), "entry_point", "at most 255"},
	{"model_upload_uri is a storage path", "easymaker.training.run", set(trainingOK, "model_upload_uri", "s3://bucket/m"), "model_upload_uri", "must match"},
	{"check_point_upload_uri up to 255", "easymaker.training.run", set(trainingOK, "check_point_upload_uri", "nas://"+long256), "check_point_upload_uri", "at most 255"},
	{"dataset_list up to 10", "easymaker.training.run", set(trainingOK, "data_storage_size", 300, "dataset_list", many(11, func(int) any { return nasData[0] })), "dataset_list", "at most 10"},
	{"datasetName up to 36", "easymaker.training.run", set(trainingOK, "dataset_list", []any{map[string]any{"datasetName": strings.Repeat("d", 37), "dataUri": "nas://x"}}), "dataset_list[0].datasetName", "at most 36"},
	{"dataUri up to 255", "easymaker.training.run", set(trainingOK, "dataset_list", []any{map[string]any{"datasetName": "d", "dataUri": "nas://" + long256}}), "dataset_list[0].dataUri", "at most 255"},
	{"hyperparameter_list up to 100", "easymaker.training.run", set(trainingOK, "hyperparameter_list", many(101, func(int) any { return map[string]any{"hyperparameterKey": "k", "hyperparameterValue": "1"} })), "hyperparameter_list", "at most 100"},
	{"hyperparameterKey up to 255", "easymaker.training.run", set(trainingOK, "hyperparameter_list", []any{map[string]any{"hyperparameterKey": long256}}), "hyperparameter_list[0].hyperparameterKey", "at most 255"},
	{"hyperparameterValue up to 1000", "easymaker.training.run", set(trainingOK, "hyperparameter_list", []any{map[string]any{"hyperparameterKey": "k", "hyperparameterValue": strings.Repeat("v", 1001)}}), "hyperparameter_list[0].hyperparameterValue", "at most 1000"},

	{"nodes x trials at most 10", "easymaker.tuning.run", set(tuningOK, "distributed_node_count", 5, "parallel_trial_count", 3), "parallel_trial_count", "at most 10 (got 5 x 3 = 15)"},
	{"parallel_trial_count at most 10", "easymaker.tuning.run", set(tuningOK, "parallel_trial_count", 11), "parallel_trial_count", "between 1 and 10"},
	{"tuning name up to 50", "easymaker.tuning.run", set(tuningOK, "hyperparameter_tuning_name", long51), "hyperparameter_tuning_name", "at most 50"},
	{"tuning timeout_hours at most 720", "easymaker.tuning.run", set(tuningOK, "timeout_hours", 721), "timeout_hours", "between 1 and 720"},
	{"metric_list up to 10", "easymaker.tuning.run", set(tuningOK, "metric_list", many(11, func(i int) any { return "m" + string(rune('a'+i)) })), "metric_list", "at most 10"},
	{"metric_list required with an own algorithm", "easymaker.tuning.run", set(tuningOK, "metric_list", nil), "metric_list", "is required with an own algorithm"},
	{"objective_metric_name required with an own algorithm", "easymaker.tuning.run", set(tuningOK, "objective_metric_name", nil), "objective_metric_name", "is required with an own algorithm"},
	{"objective_metric_name up to 36", "easymaker.tuning.run", set(tuningOK, "objective_metric_name", strings.Repeat("m", 37)), "objective_metric_name", "at most 36"},
	{"objective_metric_name one of metric_list", "easymaker.tuning.run", set(tuningOK, "objective_metric_name", "f1"), "objective_metric_name", "must be one of metric_list"},
	{"objective_type_code required with an own algorithm", "easymaker.tuning.run", set(tuningOK, "objective_type_code", nil), "objective_type_code", "is required with an own algorithm"},
	{"objective_type_code MINIMIZE or MAXIMIZE", "easymaker.tuning.run", set(tuningOK, "objective_type_code", "LOWEST"), "objective_type_code", "must be one of MINIMIZE, MAXIMIZE"},
	{"tuning strategy enum", "easymaker.tuning.run", set(tuningOK, "tuning_strategy_name", "HYPERBAND"), "tuning_strategy_name", "must be one of BAYESIAN_OPTIMIZATION, GRID, RANDOM"},
	{"early stopping MEDIAN", "easymaker.tuning.run", set(tuningOK, "early_stopping_algorithm", "MEAN"), "early_stopping_algorithm", "must be one of MEDIAN"},
	{"hyperparameter_spec_list up to 100", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", many(101, func(int) any {
		return spec("hyperparameterTypeCode", "CATEGORICAL", "hyperparameterSpecifiedValues", "a")[0]
	})), "hyperparameter_spec_list", "at most 100"},
	{"DOUBLE min not above max", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "DOUBLE", "hyperparameterMinValue", 0.5, "hyperparameterMaxValue", 0.1)), "hyperparameter_spec_list[0].hyperparameterMaxValue", "must not be below"},
	{"INT needs a max", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "INT", "hyperparameterMinValue", 1)), "hyperparameter_spec_list[0].hyperparameterMaxValue", "is required for type INT"},
	{"GRID needs a step", "easymaker.tuning.run", set(tuningOK, "tuning_strategy_name", "GRID", "hyperparameter_spec_list", spec("hyperparameterTypeCode", "INT", "hyperparameterMinValue", 1, "hyperparameterMaxValue", 5)), "hyperparameter_spec_list[0].hyperparameterStep", "GRID strategy"},
	{"DISCRETE needs values", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "DISCRETE")), "hyperparameter_spec_list[0].hyperparameterSpecifiedValues", "is required for type DISCRETE"},
	{"a dataset needs its path", "easymaker.tuning.run", set(tuningOK, "dataset_list", []any{map[string]any{"datasetName": "d"}}), "dataset_list[0].dataUri", "is required"},
	{"a metric name is not empty", "easymaker.tuning.run", set(tuningOK, "metric_list", []any{"val_loss", ""}, "objective_metric_name", "val_loss"), "metric_list[1]", "is empty"},
	{"INT bounds are whole", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "INT", "hyperparameterMinValue", 1.5, "hyperparameterMaxValue", 5)), "hyperparameter_spec_list[0].hyperparameterMinValue", "whole number"},
	{"specified values up to 3000", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "CATEGORICAL", "hyperparameterSpecifiedValues", strings.Repeat("a,", 1501))), "hyperparameter_spec_list[0].hyperparameterSpecifiedValues", "at most 3000"},
	{"hyperparameter type enum", "easymaker.tuning.run", set(tuningOK, "hyperparameter_spec_list", spec("hyperparameterTypeCode", "FLOAT")), "hyperparameter_spec_list[0].hyperparameterTypeCode", "must be one of INT, DOUBLE, DISCRETE, CATEGORICAL"},

	{"a model from a training or a tuning, not both", "easymaker.model.create", set(modelOK, "hyperparameter_tuning_id", "hpt-1"), "hyperparameter_tuning_id", "not both"},
	{"a model needs a source", "easymaker.model.create", set(modelOK, "training_id", nil), "training_id", "is required unless hyperparameter_tuning_id"},
	{"model name up to 50", "easymaker.model.create", set(modelOK, "model_name", long51), "model_name", "at most 50"},
	{"model description up to 255", "easymaker.model.create", set(modelOK, "model_description", long256), "model_description", "at most 255"},
	{"framework TENSORFLOW or PYTORCH", "easymaker.model.create_from_uri", set(uriModelOK, "framework_code", "JAX"), "framework_code", "must be one of TENSORFLOW, PYTORCH"},
	{"model_uri up to 255", "easymaker.model.create_from_uri", set(uriModelOK, "model_uri", "obs://"+long256), "model_uri", "at most 255"},
	{"model ID up to 36", "easymaker.model.delete", map[string]any{"model_id": strings.Repeat("i", 37)}, "model_id", "at most 36"},

	{"endpoint name up to 50", "easymaker.endpoint.create", set(endpointOK, "endpoint_name", long51), "endpoint_name", "at most 50"},
	{"endpoint_instance_count at most 10", "easymaker.endpoint.create", set(endpointOK, "endpoint_instance_count", 11), "endpoint_instance_count", "between 1 and 10"},
	{"at least one model resource", "easymaker.endpoint.create", set(endpointOK, "endpoint_model_resource_list", []any{}), "endpoint_model_resource_list", "between 1 and 10 items (got 0)"},
	{"at most 10 model resources", "easymaker.endpoint.create", set(endpointOK, "endpoint_model_resource_list", many(11, func(i int) any {
		return map[string]any{"modelId": "m", "apigwResourceUri": "/p" + string(rune('a'+i)), "podCount": 1}
	})), "endpoint_model_resource_list", "between 1 and 10 items (got 11)"},
	{"apigwResourceUri starts with /", "easymaker.endpoint.create", set(endpointOK, "endpoint_model_resource_list", []any{set(resource, "apigwResourceUri", "predict")}), "endpoint_model_resource_list[0].apigwResourceUri", "must match ^/"},
	{"podCount at most 100", "easymaker.endpoint.create", set(endpointOK, "endpoint_model_resource_list", []any{set(resource, "podCount", 101)}), "endpoint_model_resource_list[0].podCount", "between 1 and 100"},
	{"resource description up to 255", "easymaker.endpoint.create", set(endpointOK, "endpoint_model_resource_list", []any{set(resource, "description", long256)}), "endpoint_model_resource_list[0].description", "at most 255"},
	{"stage name up to 50", "easymaker.endpoint.create_stage", set(stageOK, "stage_name", long51), "stage_name", "at most 50"},
	{"stage description up to 255", "easymaker.endpoint.create_stage", set(stageOK, "stage_description", long256), "stage_description", "at most 255"},
	{"stage ID up to 36", "easymaker.endpoint.delete_stage", map[string]any{"stage_id": strings.Repeat("i", 37)}, "stage_id", "at most 36"},
	{"predict needs a stage", "easymaker.endpoint.predict", map[string]any{"json": map[string]any{"instances": []any{}}}, "endpoint_id", "is required unless endpoint_stage_id"},

	{"batch instance_count at most 10", "easymaker.batch_inference.run", set(batchOK, "instance_count", 11), "instance_count", "between 1 and 10"},
	{"batch pod_count at most 100", "easymaker.batch_inference.run", set(batchOK, "pod_count", 101), "pod_count", "between 1 and 100"},
	{"batch_size at most 1000", "easymaker.batch_inference.run", set(batchOK, "batch_size", 1001), "batch_size", "between 1 and 1000"},
	{"inference_timeout_seconds at most 1200", "easymaker.batch_inference.run", set(batchOK, "inference_timeout_seconds", 1201), "inference_timeout_seconds", "between 1 and 1200"},
	{"input_data_type JSON or JSONL", "easymaker.batch_inference.run", set(batchOK, "input_data_type", "CSV"), "input_data_type", "must be one of JSON, JSONL"},
	{"batch timeout_hours at most 720", "easymaker.batch_inference.run", set(batchOK, "timeout_hours", 721), "timeout_hours", "between 1 and 720"},
	{"batch data_storage_size required", "easymaker.batch_inference.run", set(batchOK, "data_storage_size", nil), "data_storage_size", "is required"},
	{"batch include_glob_pattern up to 255", "easymaker.batch_inference.run", set(batchOK, "include_glob_pattern", long256), "include_glob_pattern", "at most 255"},
	{"batch name up to 50", "easymaker.batch_inference.run", set(batchOK, "batch_inference_name", long51), "batch_inference_name", "at most 50"},
	{"batch description up to 255", "easymaker.batch_inference.run", set(batchOK, "description", long256), "description", "at most 255"},
	{"batch ID up to 36", "easymaker.batch_inference.delete", map[string]any{"batch_inference_id": strings.Repeat("i", 37)}, "batch_inference_id", "at most 36"},
}

// bookOf writes a playbook with one step of typ and with.
func bookOf(t *testing.T, typ string, w map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(w)
	require.NoError(t, err)
	var sb strings.Builder
	sb.WriteString("version: 1\nname: limits\nsteps:\n  - id: s\n    uses: " + typ + "\n    with:\n")
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		sb.WriteString("      " + line + "\n")
	}
	return sb.String()
}

var diagRE = regexp.MustCompile(`^bad\.yaml:(\d+):(\d+): steps\[0\]\.with\.(\S+): (.*)$`)

func TestEveryLimitOfTheSpecIsALoadErrorAtItsPosition(t *testing.T) {
	for _, tc := range limitCases {
		t.Run(tc.name, func(t *testing.T) {
			src := bookOf(t, tc.typ, tc.with)
			_, err := playbook.Parse("bad.yaml", []byte(src), playbook.LoadOptions{})
			require.Error(t, err)
			var ds playbook.Diagnostics
			require.ErrorAs(t, err, &ds)
			lines := strings.Split(src, "\n")
			var found *playbook.Diagnostic
			for i := range ds {
				if ds[i].Path == "steps[0].with."+tc.path && strings.Contains(ds[i].Message, tc.want) {
					found = &ds[i]
				}
			}
			require.NotNil(t, found, "want %s: ...%s... among:\n%s", tc.path, tc.want, ds.Error())
			assert.Regexp(t, diagRE, found.String())
			require.Positive(t, found.Pos.Line)
			require.LessOrEqual(t, found.Pos.Line, len(lines))
			key := tc.path[strings.LastIndex(tc.path, ".")+1:]
			switch {
			case strings.Contains(key, "["):
			case strings.Contains(src, key+":"):
				assert.Contains(t, lines[found.Pos.Line-1], key+":", "the position points at the offending key")
			default: // a missing key: the position is its parent's
				assert.Regexp(t, `with:|- `, lines[found.Pos.Line-1], "the position points at the object that lacks the key")
			}
			assert.Len(t, ds, 1, "one problem, one diagnostic:\n%s", ds.Error())
		})
	}
}

func TestTheValidParamsOfTheLimitCasesLoad(t *testing.T) {
	for typ, w := range map[string]map[string]any{
		"easymaker.experiment.create": experimentOK, "easymaker.training.run": trainingOK, "own training": ownTraining,
		"easymaker.tuning.run": tuningOK, "easymaker.model.create": modelOK, "easymaker.model.create_from_uri": uriModelOK,
		"easymaker.endpoint.create": endpointOK, "easymaker.endpoint.create_stage": stageOK, "easymaker.batch_inference.run": batchOK,
		"NAS data needs no storage size": set(ownTraining, "data_storage_size", nil, "source_dir_uri", "nas://share/src", "dataset_list", nasData),
	} {
		t.Run(typ, func(t *testing.T) {
			step := typ
			if !strings.HasPrefix(step, "easymaker.") {
				step = "easymaker.training.run"
			}
			pb, err := playbook.Parse("ok.yaml", []byte(bookOf(t, step, w)), playbook.LoadOptions{})
			require.NoError(t, err)
			require.Len(t, pb.Steps, 1)
			got := pb.Steps[0]
			assert.Equal(t, step, got.Uses)
			var keys []string
			for k, v := range w {
				if v != nil {
					keys = append(keys, k)
				}
			}
			assert.ElementsMatch(t, keys, got.WithKeys, "every param is kept")
			assert.Empty(t, got.Desc.CheckLiteral(w), "the step's own check agrees")
		})
	}
}

// TestRulesSkipValuesFromExpressions: a rule that needs a value computed at
// run time is not judged at load time; the same params with that value
// written literally (bad) are refused, so it is the skip that lets them load.
func TestRulesSkipValuesFromExpressions(t *testing.T) {
	cases := []struct {
		typ  string
		with map[string]any
		bad  any // what the computed value is, written literally
		want string
	}{
		{"easymaker.tuning.run", set(tuningOK, "distributed_node_count", 5, "parallel_trial_count", steps.Dynamic{}), 3, "must be at most 10"},
		{"easymaker.tuning.run", set(tuningOK, "metric_list", steps.Dynamic{}), []any{}, "metric_list"},
		{"easymaker.tuning.run", set(tuningOK, "metric_list", []any{"val_loss", steps.Dynamic{}}, "objective_metric_name", "f1"), "", "metric_list[1]"},
		{"easymaker.training.run", set(ownTraining, "data_storage_size", nil, "source_dir_uri", steps.Dynamic{}), obsPrefix + "/src", "data_storage_size: is required"},
		{"easymaker.training.run", set(trainingOK, "algorithm_name", steps.Dynamic{}, "source_dir_uri", obsPrefix, "data_storage_size", 300), classifier, "source_dir_uri"},
		{"easymaker.model.create", set(modelOK, "hyperparameter_tuning_id", steps.Dynamic{}), "tune-1", "hyperparameter_tuning_id"},
		{"easymaker.endpoint.predict", map[string]any{"endpoint_id": steps.Dynamic{}, "json": map[string]any{}}, "", "endpoint_id"},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			d := desc(t, tc.typ)
			assert.Empty(t, d.CheckLiteral(tc.with), "%v", tc.with)
			literal := replaceDynamic(tc.with, tc.bad).(map[string]any)
			problems := d.CheckLiteral(literal)
			require.NotEmpty(t, problems, "written literally, %v is refused", literal)
			assert.Contains(t, fmt.Sprint(problems), tc.want)
		})
	}
}

// replaceDynamic returns a copy of v with every steps.Dynamic replaced by with.
func replaceDynamic(v, with any) any {
	switch v := v.(type) {
	case steps.Dynamic:
		return with
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = replaceDynamic(x, with)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = replaceDynamic(x, with)
		}
		return out
	}
	return v
}

// TestAValueComputedInsideAListElementLoads: values computed inside literal
// list elements are not judged at load time, and reach the service as
// computed (not dropped, not zero).
func TestAValueComputedInsideAListElementLoads(t *testing.T) {
	t.Parallel()
	src := `version: 1
name: nested
inputs:
  lo: {type: number, default: 0.01}
  data: {type: string, default: "nas://share/data"}
  values: {type: string, default: "adam,sgd"}
  spec: {type: map, default: {hyperparameterName: epochs, hyperparameterTypeCode: INT, hyperparameterMinValue: 1, hyperparameterMaxValue: 9, hyperparameterStep: 1}}
  metric: {type: string, default: f1}
steps:
  - id: e
    uses: easymaker.experiment.create
    with: {experiment_name: nested}
  - id: t
    uses: easymaker.tuning.run
    with:
      experiment_id: ${{ steps.e.outputs.experiment_id }}
      hyperparameter_tuning_name: t
      image_name: ` + cpuImage + `
      instance_name: ` + cpuFlavor + `
      algorithm_name: ` + classifier + `
      model_upload_uri: nas://m
      tuning_strategy_name: GRID
      early_stopping_algorithm: MEDIAN
      wait: false
      dataset_list:
        - {datasetName: train, dataUri: "${{ inputs.data }}"}
      metric_list: [val_loss, "${{ inputs.metric }}"]
      objective_metric_name: f1
      hyperparameter_spec_list:
        - {hyperparameterName: lr, hyperparameterTypeCode: DOUBLE, hyperparameterMinValue: "${{ inputs.lo }}", hyperparameterMaxValue: 0.1, hyperparameterStep: "${{ inputs.lo }}"}
        - {hyperparameterName: optimizer, hyperparameterTypeCode: CATEGORICAL, hyperparameterSpecifiedValues: "${{ inputs.values }}"}
        - "${{ inputs.spec }}"
`
	pb, err := playbook.Parse("nested.yaml", []byte(src), playbook.LoadOptions{})
	require.NoError(t, err)

	s := startSim(t)
	e := newEngine(t, s.srv)
	run, err := e.Run(context.Background(), pb, engine.StartRequest{})
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, run.Status)
	var body struct {
		DatasetList []struct {
			DatasetName string `json:"datasetName"`
			DataURI     string `json:"dataUri"`
		} `json:"datasetList"`
		MetricList []string         `json:"metricList"`
		Specs      []map[string]any `json:"hyperparameterSpecList"`
	}
	var posted []string
	for _, c := range s.srv.Journal.Calls("easymaker", "POST", "") {
		if strings.HasSuffix(c.Path, "/hyperparameter-tunings") {
			posted = append(posted, c.Body)
		}
	}
	require.Len(t, posted, 1, "one tuning was created")
	require.NoError(t, json.Unmarshal([]byte(posted[0]), &body))
	require.Len(t, body.DatasetList, 1)
	assert.Equal(t, "nas://share/data", body.DatasetList[0].DataURI)
	assert.Equal(t, []string{"val_loss", "f1"}, body.MetricList)
	require.Len(t, body.Specs, 3)
	assert.EqualValues(t, "0.01", fmt.Sprint(body.Specs[0]["hyperparameterMinValue"]))
	assert.EqualValues(t, "0.01", fmt.Sprint(body.Specs[0]["hyperparameterStep"]))
	assert.Equal(t, "adam,sgd", body.Specs[1]["hyperparameterSpecifiedValues"])
	assert.Equal(t, "epochs", body.Specs[2]["hyperparameterName"])
	assert.EqualValues(t, "9", fmt.Sprint(body.Specs[2]["hyperparameterMaxValue"]))
}
