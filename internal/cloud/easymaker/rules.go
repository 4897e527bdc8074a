package easymaker

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/fault"
)

// The spec's limits (spec/webhook-and-ml-sdk.md, "Limits"). The Problems
// methods below check them; the simulator answers 400 with the same
// findings and the steps can check them before a call. Problem paths use
// the SDK's parameter names (training_name, tag_list[2].tagKey); fields the
// SDK takes as names and the API as IDs are named by the API (flavor_id).
// BodyPath turns such a path into the request body's camelCase name.
const (
	MaxNameLen          = 50
	MaxDescriptionLen   = 255
	MaxURILen           = 255
	MaxIDLen            = 36
	MaxTags             = 10
	MaxDatasets         = 10
	MaxHyperparams      = 100
	MaxMetrics          = 10
	MaxModelResources   = 10
	MinStorageGB        = 300
	MaxStorageGB        = 10000
	MaxTimeoutHours     = 720
	MaxNodesTimesTrials = 10
)

type checker struct{ ps []fault.Problem }

func (c *checker) add(path, format string, args ...any) {
	c.ps = append(c.ps, fault.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) str(path, v string, required bool, max int) {
	switch n := utf8.RuneCountInString(v); {
	case required && strings.TrimSpace(v) == "":
		c.add(path, "is required")
	case n > max:
		c.add(path, "must be at most %d characters (got %d)", max, n)
	}
}

func (c *checker) between(path string, v, lo, hi int) {
	if v < lo || v > hi {
		c.add(path, "must be between %d and %d (got %d)", lo, hi, v)
	}
}

// optBetween checks v when it is set (non-zero).
func (c *checker) optBetween(path string, v, lo, hi int) {
	if v != 0 {
		c.between(path, v, lo, hi)
	}
}

func (c *checker) oneOf(path, v string, required bool, allowed ...string) {
	if v == "" {
		if required {
			c.add(path, "is required (one of %s)", strings.Join(allowed, ", "))
		}
		return
	}
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.add(path, "must be one of %s (got %q)", strings.Join(allowed, ", "), v)
}

func (c *checker) tags(tags []Tag) {
	if len(tags) > MaxTags {
		c.add("tag_list", "must have at most %d elements (got %d)", MaxTags, len(tags))
	}
	for i, t := range tags {
		p := fmt.Sprintf("tag_list[%d].", i)
		c.str(p+"tagKey", t.TagKey, true, 64)
		c.str(p+"tagValue", t.TagValue, false, 255)
	}
}

func (c *checker) datasets(ds []Dataset) {
	if len(ds) > MaxDatasets {
		c.add("dataset_list", "must have at most %d elements (got %d)", MaxDatasets, len(ds))
	}
	for i, d := range ds {
		p := fmt.Sprintf("dataset_list[%d].", i)
		c.str(p+"datasetName", d.DatasetName, true, 36)
		c.str(p+"dataUri", d.DataURI, true, MaxURILen)
		c.path(p+"dataUri", d.DataURI)
	}
}

func (c *checker) hyperparams(hs []Hyperparameter) {
	if len(hs) > MaxHyperparams {
		c.add("hyperparameter_list", "must have at most %d elements (got %d)", MaxHyperparams, len(hs))
	}
	for i, h := range hs {
		p := fmt.Sprintf("hyperparameter_list[%d].", i)
		c.str(p+"hyperparameterKey", h.HyperparameterKey, true, 255)
		c.str(p+"hyperparameterValue", h.HyperparameterValue, false, 1000)
	}
}

func (c *checker) storage(path string, v int, required bool) {
	if v == 0 && !required {
		return
	}
	c.between(path, v, MinStorageGB, MaxStorageGB)
}

// path checks a storage path: object storage (obs://) or NAS (nas://).
func (c *checker) path(path, v string) {
	if v != "" && !strings.HasPrefix(v, "obs://") && !strings.HasPrefix(v, "nas://") {
		c.add(path, "must be an object storage (obs://) or NAS (nas://) path (got %q)", v)
	}
}

// dataStorage requires data_storage_size when an input of a training is
// in object storage: the service copies it to a volume of that size. With
// NAS inputs only it is not needed (but still bounded when given).
func (c *checker) dataStorage(size int, sourceDir, checkpointIn string, ds []Dataset) {
	inputs := []struct{ name, uri string }{{"source_dir_uri", sourceDir}, {"check_point_input_uri", checkpointIn}}
	for i, d := range ds {
		inputs = append(inputs, struct{ name, uri string }{fmt.Sprintf("dataset_list[%d].dataUri", i), d.DataURI})
	}
	for _, in := range inputs {
		if size == 0 && strings.HasPrefix(in.uri, "obs://") {
			c.add("data_storage_size", "is required (%d to %d GB) when data comes from object storage (%s is %s); it is not needed with NAS paths",
				MinStorageGB, MaxStorageGB, in.name, in.uri)
			return
		}
	}
	c.storage("data_storage_size", size, false)
}

// torchrun: nproc_per_node is only taken with use_torchrun.
func (c *checker) torchrun(use bool, nproc int) {
	switch {
	case nproc < 0:
		c.add("nproc_per_node", "must be at least 1 (got %d)", nproc)
	case nproc != 0 && !use:
		c.add("nproc_per_node", "is only taken with use_torchrun (got %d without it)", nproc)
	}
}

// uris checks the length and form of storage paths, by name.
func (c *checker) uris(required bool, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		c.str(kv[i], kv[i+1], required, MaxURILen)
		c.path(kv[i], kv[i+1])
	}
}

// algorithm checks the choice between a provided algorithm and an own one.
func (c *checker) algorithm(algorithmID, sourceDir, entryPoint string) {
	c.str("algorithm_id", algorithmID, false, MaxIDLen)
	c.uris(false, "source_dir_uri", sourceDir)
	c.str("entry_point", entryPoint, false, MaxURILen)
	switch {
	case algorithmID != "" && (sourceDir != "" || entryPoint != ""):
		c.add("algorithm_id", "give either a provided algorithm or source_dir_uri and entry_point, not both")
	case algorithmID == "" && sourceDir == "" && entryPoint == "":
		c.add("algorithm_id", "is required unless an own algorithm is given (source_dir_uri and entry_point)")
	case algorithmID == "" && sourceDir == "":
		c.add("source_dir_uri", "is required with entry_point (an own algorithm needs both)")
	case algorithmID == "" && entryPoint == "":
		c.add("entry_point", "is required with source_dir_uri (an own algorithm needs both)")
	}
}

func (c *checker) resources(rs []ModelResource) {
	switch {
	case len(rs) == 0:
		c.add("endpoint_model_resource_list", "is required (1 to %d elements)", MaxModelResources)
	case len(rs) > MaxModelResources:
		c.add("endpoint_model_resource_list", "must have at most %d elements (got %d)", MaxModelResources, len(rs))
	}
	seen := map[string]int{}
	for i, r := range rs {
		p := fmt.Sprintf("endpoint_model_resource_list[%d].", i)
		c.str(p+"modelId", r.ModelID, true, MaxIDLen)
		c.str(p+"apigwResourceUri", r.APIGWResourceURI, true, MaxURILen)
		if r.APIGWResourceURI != "" && !strings.HasPrefix(r.APIGWResourceURI, "/") {
			c.add(p+"apigwResourceUri", "must start with / (got %q)", r.APIGWResourceURI)
		}
		if j, dup := seen[r.APIGWResourceURI]; dup && r.APIGWResourceURI != "" {
			c.add(p+"apigwResourceUri", "repeats element %d (%s)", j, r.APIGWResourceURI)
		}
		seen[r.APIGWResourceURI] = i
		c.between(p+"podCount", r.PodCount, 1, 100)
		c.str(p+"description", r.Description, false, MaxDescriptionLen)
	}
}

// Problems checks an experiment create against the spec's limits.
func (r *CreateExperimentRequest) Problems() []fault.Problem {
	var c checker
	c.str("experiment_name", r.ExperimentName, true, MaxNameLen)
	c.str("experiment_description", r.ExperimentDescription, false, MaxDescriptionLen)
	c.tags(r.TagList)
	return c.ps
}

// Problems checks a training run against the spec's limits.
func (r *CreateTrainingRequest) Problems() []fault.Problem {
	var c checker
	c.str("experiment_id", r.ExperimentID, true, MaxIDLen)
	c.str("training_name", r.TrainingName, true, MaxNameLen)
	c.str("training_description", r.TrainingDescription, false, MaxDescriptionLen)
	c.str("image_id", r.ImageID, true, MaxIDLen)
	c.str("flavor_id", r.FlavorID, true, MaxIDLen)
	c.between("distributed_node_count", r.DistributedNodeCount, 1, 10)
	c.torchrun(r.UseTorchrun, r.NprocPerNode)
	c.dataStorage(r.DataStorageSize, r.SourceDirURI, r.CheckPointInputURI, r.DatasetList)
	c.algorithm(r.AlgorithmID, r.SourceDirURI, r.EntryPoint)
	c.uris(true, "model_upload_uri", r.ModelUploadURI)
	c.uris(false, "check_point_input_uri", r.CheckPointInputURI, "check_point_upload_uri", r.CheckPointUploadURI)
	c.optBetween("timeout_hours", r.TimeoutHours, 1, MaxTimeoutHours)
	c.hyperparams(r.HyperparameterList)
	c.datasets(r.DatasetList)
	c.tags(r.TagList)
	return c.ps
}

// Problems checks a tuning run against the spec's limits.
func (r *CreateTuningRequest) Problems() []fault.Problem {
	var c checker
	c.str("experiment_id", r.ExperimentID, true, MaxIDLen)
	c.str("hyperparameter_tuning_name", r.HyperparameterTuningName, true, MaxNameLen)
	c.str("hyperparameter_tuning_description", r.HyperparameterTuningDescription, false, MaxDescriptionLen)
	c.str("image_id", r.ImageID, true, MaxIDLen)
	c.str("flavor_id", r.FlavorID, true, MaxIDLen)
	c.between("distributed_node_count", r.DistributedNodeCount, 1, 10)
	c.between("parallel_trial_count", r.ParallelTrialCount, 1, 10)
	if p := r.DistributedNodeCount * r.ParallelTrialCount; p > MaxNodesTimesTrials {
		c.add("parallel_trial_count", "distributed_node_count x parallel_trial_count must be at most %d (got %d x %d = %d)",
			MaxNodesTimesTrials, r.DistributedNodeCount, r.ParallelTrialCount, p)
	}
	c.torchrun(r.UseTorchrun, r.NprocPerNode)
	c.dataStorage(r.DataStorageSize, r.SourceDirURI, r.CheckPointInputURI, r.DatasetList)
	c.algorithm(r.AlgorithmID, r.SourceDirURI, r.EntryPoint)
	c.uris(true, "model_upload_uri", r.ModelUploadURI)
	c.uris(false, "check_point_input_uri", r.CheckPointInputURI, "check_point_upload_uri", r.CheckPointUploadURI)
	c.optBetween("timeout_hours", r.TimeoutHours, 1, MaxTimeoutHours)
	if len(r.HyperparameterSpecList) > MaxHyperparams {
		c.add("hyperparameter_spec_list", "must have at most %d elements (got %d)", MaxHyperparams, len(r.HyperparameterSpecList))
	}
	for i, s := range r.HyperparameterSpecList {
		p := fmt.Sprintf("hyperparameter_spec_list[%d].", i)
		c.str(p+"hyperparameterName", s.HyperparameterName, false, 255)
		c.oneOf(p+"hyperparameterTypeCode", s.HyperparameterTypeCode, false,
			HyperparameterTypeInt, HyperparameterTypeFloat, HyperparameterTypeDisc, HyperparameterTypeCat)
		switch s.HyperparameterTypeCode {
		case HyperparameterTypeInt, HyperparameterTypeFloat:
			if s.HyperparameterMinValue == nil || s.HyperparameterMaxValue == nil {
				c.add(p+"hyperparameterMinValue", "INT and DOUBLE need hyperparameterMinValue and hyperparameterMaxValue")
			} else if *s.HyperparameterMinValue > *s.HyperparameterMaxValue {
				c.add(p+"hyperparameterMaxValue", "must not be below hyperparameterMinValue (%g > %g)", *s.HyperparameterMinValue, *s.HyperparameterMaxValue)
			}
			if r.TuningStrategyName == StrategyGrid && (s.HyperparameterStep == nil || *s.HyperparameterStep <= 0) {
				c.add(p+"hyperparameterStep", "the GRID strategy needs a positive step for INT and DOUBLE")
			}
		case HyperparameterTypeDisc, HyperparameterTypeCat:
			c.str(p+"hyperparameterSpecifiedValues", s.HyperparameterSpecifiedValues, true, 3000)
		}
	}
	c.datasets(r.DatasetList)
	own := r.AlgorithmID == ""
	if len(r.MetricList) > MaxMetrics {
		c.add("metric_list", "must have at most %d elements (got %d)", MaxMetrics, len(r.MetricList))
	}
	if own && len(r.MetricList) == 0 {
		c.add("metric_list", "is required with an own algorithm")
	}
	c.str("metric_regex", r.MetricRegex, false, 255)
	c.str("objective_metric_name", r.ObjectiveMetricName, own, 36)
	if r.ObjectiveMetricName != "" && len(r.MetricList) > 0 && !contains(r.MetricList, r.ObjectiveMetricName) {
		c.add("objective_metric_name", "must be one of metric_list (%s; got %q)", strings.Join(r.MetricList, ", "), r.ObjectiveMetricName)
	}
	c.oneOf("objective_type_code", r.ObjectiveTypeCode, own, ObjectiveMinimize, ObjectiveMaximize)
	if r.MaxFailedTrialCount < 0 {
		c.add("max_failed_trial_count", "must not be negative (got %d)", r.MaxFailedTrialCount)
	}
	if r.MaxTrialCount < 0 {
		c.add("max_trial_count", "must not be negative (got %d)", r.MaxTrialCount)
	}
	c.oneOf("tuning_strategy_name", r.TuningStrategyName, true, StrategyBayesian, StrategyGrid, StrategyRandom)
	c.oneOf("early_stopping_algorithm", r.EarlyStoppingAlgorithm, true, EarlyStoppingMedian)
	if r.EarlyStoppingMinTrialCount < 0 {
		c.add("early_stopping_min_trial_count", "must be at least 1 (got %d)", r.EarlyStoppingMinTrialCount)
	}
	if r.EarlyStoppingStartStep < 0 {
		c.add("early_stopping_start_step", "must be at least 1 (got %d)", r.EarlyStoppingStartStep)
	}
	c.tags(r.TagList)
	return c.ps
}

// Problems checks a model create: exactly one source, and a framework
// code with a URI.
func (r *CreateModelRequest) Problems() []fault.Problem {
	var c checker
	c.str("model_name", r.ModelName, true, MaxNameLen)
	c.str("model_description", r.ModelDescription, false, MaxDescriptionLen)
	c.str("training_id", r.TrainingID, false, MaxIDLen)
	c.str("hyperparameter_tuning_id", r.HyperparameterTuningID, false, MaxIDLen)
	c.uris(false, "model_uri", r.ModelURI)
	n := 0
	for _, v := range []string{r.TrainingID, r.HyperparameterTuningID, r.ModelURI} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		c.add("training_id", "give exactly one of training_id, hyperparameter_tuning_id or model_uri (got %d)", n)
	}
	if r.ModelURI != "" {
		c.oneOf("framework_code", r.FrameworkCode, true, FrameworkTensorFlow, FrameworkPyTorch)
	}
	c.tags(r.TagList)
	return c.ps
}

// Problems checks an endpoint create.
func (r *CreateEndpointRequest) Problems() []fault.Problem {
	var c checker
	c.str("endpoint_name", r.EndpointName, true, MaxNameLen)
	c.str("endpoint_description", r.EndpointDescription, false, MaxDescriptionLen)
	c.str("flavor_id", r.FlavorID, true, MaxIDLen)
	c.optBetween("endpoint_instance_count", r.EndpointInstanceCount, 1, 10)
	c.resources(r.EndpointModelResourceList)
	c.tags(r.TagList)
	return c.ps
}

// Problems checks a stage create.
func (r *CreateStageRequest) Problems() []fault.Problem {
	var c checker
	c.str("endpoint_id", r.EndpointID, true, MaxIDLen)
	c.str("stage_name", r.EndpointStageName, true, MaxNameLen)
	c.str("stage_description", r.EndpointStageDescription, false, MaxDescriptionLen)
	c.str("flavor_id", r.FlavorID, true, MaxIDLen)
	c.optBetween("endpoint_instance_count", r.EndpointInstanceCount, 1, 10)
	c.resources(r.EndpointModelResourceList)
	c.tags(r.TagList)
	return c.ps
}

// Problems checks a batch inference run.
func (r *CreateBatchInferenceRequest) Problems() []fault.Problem {
	var c checker
	c.str("batch_inference_name", r.BatchInferenceName, true, MaxNameLen)
	c.str("description", r.BatchInferenceDescription, false, MaxDescriptionLen)
	c.str("flavor_id", r.FlavorID, true, MaxIDLen)
	c.str("model_id", r.ModelID, true, MaxIDLen)
	c.between("instance_count", r.InstanceCount, 1, 10)
	c.optBetween("timeout_hours", r.TimeoutHours, 1, MaxTimeoutHours)
	c.between("pod_count", r.PodCount, 1, 100)
	c.between("batch_size", r.BatchSize, 1, 1000)
	c.between("inference_timeout_seconds", r.InferenceTimeoutSeconds, 1, 1200)
	c.uris(true, "input_data_uri", r.InputDataURI)
	c.oneOf("input_data_type", r.InputDataType, true, InputDataTypeJSON, InputDataTypeJSONL)
	c.str("include_glob_pattern", r.IncludeGlobPattern, false, MaxURILen)
	c.str("exclude_glob_pattern", r.ExcludeGlobPattern, false, MaxURILen)
	c.uris(true, "output_upload_uri", r.OutputUploadURI)
	c.storage("data_storage_size", r.DataStorageSize, true)
	c.tags(r.TagList)
	return c.ps
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}
