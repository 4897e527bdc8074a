package easymaker_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/steps"
)

// limit is one keyword the params schema must carry at path: a param, a
// "[]" after a list's name steps into its elements (tag_list[].tagKey).
type limit struct {
	path, keyword string
	want          any
}

func between(path string, lo, hi int) []limit {
	return []limit{{path, "minimum", lo}, {path, "maximum", hi}}
}

func upTo(path string, n int) []limit { return []limit{{path, "maxLength", n}} }

func atLeast(path string, n int) []limit { return []limit{{path, "minimum", n}} }

func items(path string, lo, hi int) []limit {
	ls := []limit{{path, "maxItems", hi}}
	if lo > 0 {
		ls = append(ls, limit{path, "minItems", lo})
	}
	return ls
}

func oneOf(path string, values ...string) []limit { return []limit{{path, "enum", values}} }

func pattern(path, re string) []limit { return []limit{{path, "pattern", re}} }

func join(groups ...[]limit) []limit {
	var out []limit
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func id(path string) []limit { return upTo(path, em.MaxIDLen) }

// The spec's ranges (spec/webhook-and-ml-sdk.md, parameter tables and
// "Limits"), stated with the constants the simulator checks them by.
var (
	tagLimits = join(items("tag_list", 0, em.MaxTags), upTo("tag_list[].tagKey", em.MaxTagKeyLen), upTo("tag_list[].tagValue", em.MaxTagValueLen))

	datasetLimits = join(items("dataset_list", 0, em.MaxDatasets), upTo("dataset_list[].datasetName", em.MaxDatasetNameLen),
		upTo("dataset_list[].dataUri", em.MaxURILen), upTo("dataset_list[].datasetUri", em.MaxURILen))

	algorithmLimits = join(atLeast("nproc_per_node", 1), between("data_storage_size", em.MinStorageGB, em.MaxStorageGB),
		upTo("algorithm_name", em.MaxAlgorithmNameLen), upTo("source_dir_uri", em.MaxURILen), upTo("entry_point", em.MaxURILen),
		upTo("model_upload_uri", em.MaxURILen), upTo("check_point_input_uri", em.MaxURILen), upTo("check_point_upload_uri", em.MaxURILen),
		between("timeout_hours", 1, em.MaxTimeoutHours), datasetLimits, tagLimits)

	servingLimits = join(between("endpoint_instance_count", 1, em.MaxInstances),
		items("endpoint_model_resource_list", 1, em.MaxModelResources), id("endpoint_model_resource_list[].modelId"),
		upTo("endpoint_model_resource_list[].apigwResourceUri", em.MaxURILen), pattern("endpoint_model_resource_list[].apigwResourceUri", "^/"),
		between("endpoint_model_resource_list[].podCount", 1, em.MaxPods),
		upTo("endpoint_model_resource_list[].description", em.MaxDescriptionLen), tagLimits)

	specLimits = map[string][]limit{
		"easymaker.experiment.create": join(upTo("experiment_name", em.MaxNameLen), upTo("experiment_description", em.MaxDescriptionLen), tagLimits),
		"easymaker.experiment.delete": id("experiment_id"),
		"easymaker.training.run": join(id("experiment_id"), upTo("training_name", em.MaxNameLen),
			upTo("training_description", em.MaxDescriptionLen), between("distributed_node_count", 1, em.MaxNodes),
			items("hyperparameter_list", 0, em.MaxHyperparams), upTo("hyperparameter_list[].hyperparameterKey", em.MaxHyperparamKeyLen),
			upTo("hyperparameter_list[].hyperparameterValue", em.MaxHyperparamValueLen), algorithmLimits),
		"easymaker.training.delete": id("training_id"),
		"easymaker.tuning.run": join(id("experiment_id"), upTo("hyperparameter_tuning_name", em.MaxNameLen),
			upTo("hyperparameter_tuning_description", em.MaxDescriptionLen),
			between("distributed_node_count", 1, em.MaxNodes), between("parallel_trial_count", 1, em.MaxParallelTrials),
			items("hyperparameter_spec_list", 0, em.MaxHyperparams), upTo("hyperparameter_spec_list[].hyperparameterName", em.MaxHyperparamNameLen),
			oneOf("hyperparameter_spec_list[].hyperparameterTypeCode", em.HyperparameterTypeInt, em.HyperparameterTypeFloat, em.HyperparameterTypeDisc, em.HyperparameterTypeCat),
			upTo("hyperparameter_spec_list[].hyperparameterSpecifiedValues", em.MaxSpecifiedValuesLen),
			items("metric_list", 0, em.MaxMetrics), upTo("metric_regex", em.MaxMetricRegexLen),
			upTo("objective_metric_name", em.MaxObjectiveMetricNameLen), oneOf("objective_type_code", em.ObjectiveMinimize, em.ObjectiveMaximize),
			oneOf("tuning_strategy_name", em.StrategyBayesian, em.StrategyGrid, em.StrategyRandom),
			oneOf("early_stopping_algorithm", em.EarlyStoppingMedian), algorithmLimits),
		"easymaker.tuning.delete": id("hyperparameter_tuning_id"),
		"easymaker.model.create": join(id("training_id"), id("hyperparameter_tuning_id"), upTo("model_name", em.MaxNameLen),
			upTo("model_description", em.MaxDescriptionLen), tagLimits),
		"easymaker.model.create_from_uri": join(oneOf("framework_code", em.FrameworkTensorFlow, em.FrameworkPyTorch),
			upTo("model_uri", em.MaxURILen), upTo("model_name", em.MaxNameLen), upTo("model_description", em.MaxDescriptionLen), tagLimits),
		"easymaker.model.delete": id("model_id"),
		"easymaker.endpoint.create": join(upTo("endpoint_name", em.MaxNameLen), upTo("endpoint_description", em.MaxDescriptionLen),
			servingLimits),
		"easymaker.endpoint.create_stage": join(id("endpoint_id"), upTo("stage_name", em.MaxNameLen),
			upTo("stage_description", em.MaxDescriptionLen), servingLimits),
		"easymaker.endpoint.stage":         id("endpoint_stage_id"),
		"easymaker.endpoint.default_stage": id("endpoint_id"),
		"easymaker.endpoint.predict":       join(id("endpoint_id"), id("endpoint_stage_id"), id("model_id")),
		"easymaker.endpoint.delete":        id("endpoint_id"),
		"easymaker.endpoint.delete_stage":  id("stage_id"),
		"easymaker.batch_inference.run": join(upTo("batch_inference_name", em.MaxNameLen), between("instance_count", 1, em.MaxInstances),
			between("timeout_hours", 1, em.MaxTimeoutHours), between("pod_count", 1, em.MaxPods), between("batch_size", 1, em.MaxBatchSize),
			between("inference_timeout_seconds", 1, em.MaxInferenceTimeoutSeconds), upTo("input_data_uri", em.MaxURILen),
			oneOf("input_data_type", em.InputDataTypeJSON, em.InputDataTypeJSONL), upTo("include_glob_pattern", em.MaxURILen),
			upTo("exclude_glob_pattern", em.MaxURILen), upTo("output_upload_uri", em.MaxURILen),
			between("data_storage_size", em.MinStorageGB, em.MaxStorageGB), upTo("description", em.MaxDescriptionLen), tagLimits),
		"easymaker.batch_inference.delete": id("batch_inference_id"),
		"easymaker.list":                   id("experiment_id"),
	}
)

// TestTheParamsSchemaCarriesEveryRangeOfTheSpec: each range of the spec
// that applies to a param is in the step's generated params schema, so an
// editor shows it and the load-time check refuses a value outside it.
func TestTheParamsSchemaCarriesEveryRangeOfTheSpec(t *testing.T) {
	var registered []string
	for _, name := range steps.Names() {
		if strings.HasPrefix(name, "easymaker.") {
			registered = append(registered, name)
		}
	}
	var listed []string
	for typ := range specLimits {
		listed = append(listed, typ)
	}
	sort.Strings(listed)
	require.ElementsMatch(t, registered, listed, "every easymaker step type states the spec's ranges of its params")
	for _, typ := range listed {
		schema := desc(t, typ).ParamsSchema()
		for _, l := range specLimits[typ] {
			t.Run(fmt.Sprintf("%s %s %s", typ, l.path, l.keyword), func(t *testing.T) {
				s := schemaAt(t, schema, l.path)
				got, ok := s[l.keyword]
				require.True(t, ok, "%s of %s has no %s: %v", l.path, typ, l.keyword, s)
				assert.Equal(t, normal(l.want), normal(got))
			})
		}
	}
}

// schemaAt is the schema of the value at path, without its expression
// alternative.
func schemaAt(t *testing.T, schema map[string]any, path string) map[string]any {
	t.Helper()
	s := schema
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[]")
		props, _ := s["properties"].(map[string]any)
		p, ok := props[name].(map[string]any)
		require.True(t, ok, "no param %s in %s", name, path)
		s = literal(p)
		if list {
			elems, ok := s["items"].(map[string]any)
			require.True(t, ok, "%s is not a list", name)
			s = literal(elems)
		}
	}
	return s
}

// literal is the first alternative of a value that may be an expression.
func literal(s map[string]any) map[string]any {
	if alts, ok := s["anyOf"].([]any); ok && len(alts) > 0 {
		if first, ok := alts[0].(map[string]any); ok {
			return first
		}
	}
	return s
}

// normal makes numbers and lists comparable whatever their Go types.
func normal(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	return v
}
