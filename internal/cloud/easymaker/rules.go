package easymaker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/runbook/runbook/internal/fault"
)

// The spec's limits (spec/webhook-and-ml-sdk.md, "Limits" and the
// parameter tables). The Problems methods below check them; the simulator
// answers 400 with the same findings. The steps carry the per-field
// limits in their params' struct tags (a test holds the tags to these
// constants) and call the cross-field rules below from their load-time
// checks. Problem paths use the SDK's parameter names (training_name,
// tag_list[2].tagKey); fields the SDK takes as names and the API as IDs
// are named by the API (flavor_id). BodyPath turns such a path into the
// request body's camelCase name.
const (
	MaxNameLen                 = 50
	MaxDescriptionLen          = 255
	MaxURILen                  = 255
	MaxIDLen                   = 36
	MaxTagKeyLen               = 64
	MaxTagValueLen             = 255
	MaxDatasetNameLen          = 36
	MaxHyperparamKeyLen        = 255
	MaxHyperparamValueLen      = 1000
	MaxHyperparamNameLen       = 255
	MaxSpecifiedValuesLen      = 3000
	MaxAlgorithmNameLen        = 64
	MaxMetricRegexLen          = 255
	MaxObjectiveMetricNameLen  = 36
	MaxTags                    = 10
	MaxDatasets                = 10
	MaxHyperparams             = 100
	MaxMetrics                 = 10
	MaxModelResources          = 10
	MinStorageGB               = 300
	MaxStorageGB               = 10000
	MaxTimeoutHours            = 720
	MaxNodes                   = 10 // distributed_node_count
	MaxParallelTrials          = 10
	MaxNodesTimesTrials        = 10
	MaxInstances               = 10 // endpoint_instance_count, instance_count
	MaxPods                    = 100
	MaxBatchSize               = 1000
	MaxInferenceTimeoutSeconds = 1200
)

// The rules that relate several parameters. The Problems methods apply
// them to requests; the steps apply them to their params when a playbook
// loads (leaving out values computed by expressions), so each rule has one
// definition.

// NodesTimesTrials: a tuning runs at most MaxNodesTimesTrials nodes at
// once, distributed_node_count x parallel_trial_count.
func NodesTimesTrials(nodes, trials int) []fault.Problem {
	if p := nodes * trials; p > MaxNodesTimesTrials {
		return []fault.Problem{{Path: "parallel_trial_count", Message: fmt.Sprintf(
			"distributed_node_count x parallel_trial_count must be at most %d (got %d x %d = %d)", MaxNodesTimesTrials, nodes, trials, p)}}
	}
	return nil
}

// StorageInput is a path a training or tuning reads when it starts:
// Param names it (source_dir_uri, dataset_list[0].dataUri).
type StorageInput struct{ Param, URI string }

// DataStorageRequired: data_storage_size (size, 0 when not given) is
// required when an input is in object storage (obs://), since the service
// copies the data to a volume of that size; NAS (nas://) inputs are read
// in place. The first such input is named.
func DataStorageRequired(size int, inputs ...StorageInput) []fault.Problem {
	if size != 0 {
		return nil
	}
	for _, in := range inputs {
		if strings.HasPrefix(in.URI, "obs://") {
			return []fault.Problem{{Path: "data_storage_size", Message: fmt.Sprintf(
				"is required (%d to %d GB) when data comes from object storage (%s is %s); it is not needed with NAS (nas://) paths",
				MinStorageGB, MaxStorageGB, in.Param, in.URI)}}
		}
	}
	return nil
}

// AlgorithmChoice: exactly one of a provided algorithm and an own one
// (source_dir_uri and entry_point, both). param names the provided
// algorithm: algorithm_name in the SDK, algorithm_id in the API.
func AlgorithmChoice(param, provided, sourceDir, entryPoint string) []fault.Problem {
	var c checker
	own := sourceDir != "" || entryPoint != ""
	switch {
	case provided != "" && own:
		c.add(param, "give either a provided algorithm (%s) or an own one (source_dir_uri and entry_point), not both", param)
	case provided == "" && !own:
		c.add(param, "is required unless an own algorithm is given (source_dir_uri and entry_point)")
	case own && sourceDir == "":
		c.add("source_dir_uri", "is required with entry_point (an own algorithm needs both)")
	case own && entryPoint == "":
		c.add("entry_point", "is required with source_dir_uri (an own algorithm needs both)")
	}
	return c.ps
}

// NprocWithoutTorchrun reports nproc_per_node given without use_torchrun:
// only torchrun takes a number of processes per node.
func NprocWithoutTorchrun(useTorchrun bool, nproc int) bool {
	return nproc != 0 && !useTorchrun
}

// OwnAlgorithmObjective: a tuning of an own algorithm needs the metrics
// its training logs, the one to optimise and the direction.
func OwnAlgorithmObjective(metrics []string, objectiveName, objectiveType string) []fault.Problem {
	var c checker
	if len(metrics) == 0 {
		c.add("metric_list", "is required with an own algorithm (source_dir_uri and entry_point): the metric names the training logs")
	}
	if objectiveName == "" {
		c.add("objective_metric_name", "is required with an own algorithm: one of metric_list")
	}
	if objectiveType == "" {
		c.add("objective_type_code", "is required with an own algorithm: %s or %s", ObjectiveMinimize, ObjectiveMaximize)
	}
	return c.ps
}

// ObjectiveInMetrics: objective_metric_name is one of metric_list (when
// both are given).
func ObjectiveInMetrics(metrics []string, objective string) []fault.Problem {
	if objective == "" || len(metrics) == 0 || slices.Contains(metrics, objective) {
		return nil
	}
	return []fault.Problem{{Path: "objective_metric_name", Message: fmt.Sprintf(
		"must be one of metric_list (%s; got %q)", strings.Join(metrics, ", "), objective)}}
}

// HyperparameterSpecRules are what element i of hyperparameter_spec_list
// needs for its type: INT and DOUBLE take bounds (min not above max, whole
// numbers for INT) and a positive step, required with the GRID strategy
// (grid); DISCRETE and CATEGORICAL take values separated by commas and no
// bounds list.
func HyperparameterSpecRules(i int, s HyperparameterSpec, grid bool) []fault.Problem {
	var c checker
	at := fmt.Sprintf("hyperparameter_spec_list[%d].", i)
	need := func(field string, given bool, format string, args ...any) {
		if !given {
			c.add(at+field, format, args...)
		}
	}
	switch t := s.HyperparameterTypeCode; t {
	case HyperparameterTypeInt, HyperparameterTypeFloat:
		need("hyperparameterMinValue", s.HyperparameterMinValue != nil, "is required for type %s", t)
		need("hyperparameterMaxValue", s.HyperparameterMaxValue != nil, "is required for type %s", t)
		if grid {
			need("hyperparameterStep", s.HyperparameterStep != nil, "is required for type %s with the GRID strategy", t)
		}
		if s.HyperparameterMinValue != nil && s.HyperparameterMaxValue != nil && *s.HyperparameterMinValue > *s.HyperparameterMaxValue {
			c.add(at+"hyperparameterMaxValue", "must not be below hyperparameterMinValue (got min %g, max %g)", *s.HyperparameterMinValue, *s.HyperparameterMaxValue)
		}
		if s.HyperparameterStep != nil && *s.HyperparameterStep <= 0 {
			c.add(at+"hyperparameterStep", "must be positive (got %g)", *s.HyperparameterStep)
		}
		if t == HyperparameterTypeInt {
			c.whole(at+"hyperparameterMinValue", s.HyperparameterMinValue, t)
			c.whole(at+"hyperparameterMaxValue", s.HyperparameterMaxValue, t)
			c.whole(at+"hyperparameterStep", s.HyperparameterStep, t)
		}
		if s.HyperparameterSpecifiedValues != "" {
			c.add(at+"hyperparameterSpecifiedValues", "is for DISCRETE and CATEGORICAL; type %s takes min and max values", t)
		}
	case HyperparameterTypeDisc, HyperparameterTypeCat:
		need("hyperparameterSpecifiedValues", strings.TrimSpace(s.HyperparameterSpecifiedValues) != "",
			"is required for type %s: values separated by commas", t)
	}
	return c.ps
}

// RepeatedResourceURIs: the apigwResourceUri values of one
// endpoint_model_resource_list are distinct.
func RepeatedResourceURIs(rs []ModelResource) []fault.Problem {
	var c checker
	seen := map[string]int{}
	for i, r := range rs {
		if j, dup := seen[r.APIGWResourceURI]; dup && r.APIGWResourceURI != "" {
			c.add(fmt.Sprintf("endpoint_model_resource_list[%d].apigwResourceUri", i), "repeats element %d (%s)", j, r.APIGWResourceURI)
		}
		seen[r.APIGWResourceURI] = i
	}
	return c.ps
}

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
		c.str(p+"tagKey", t.TagKey, true, MaxTagKeyLen)
		c.str(p+"tagValue", t.TagValue, false, MaxTagValueLen)
	}
}

func (c *checker) datasets(ds []Dataset) {
	if len(ds) > MaxDatasets {
		c.add("dataset_list", "must have at most %d elements (got %d)", MaxDatasets, len(ds))
	}
	for i, d := range ds {
		p := fmt.Sprintf("dataset_list[%d].", i)
		c.str(p+"datasetName", d.DatasetName, true, MaxDatasetNameLen)
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
		c.str(p+"hyperparameterKey", h.HyperparameterKey, true, MaxHyperparamKeyLen)
		c.str(p+"hyperparameterValue", h.HyperparameterValue, false, MaxHyperparamValueLen)
	}
}

// specs checks hyperparameter_spec_list: its length, each element's
// fields and HyperparameterSpecRules.
func (c *checker) specs(ss []HyperparameterSpec, grid bool) {
	if len(ss) > MaxHyperparams {
		c.add("hyperparameter_spec_list", "must have at most %d elements (got %d)", MaxHyperparams, len(ss))
	}
	for i, s := range ss {
		p := fmt.Sprintf("hyperparameter_spec_list[%d].", i)
		c.str(p+"hyperparameterName", s.HyperparameterName, false, MaxHyperparamNameLen)
		c.oneOf(p+"hyperparameterTypeCode", s.HyperparameterTypeCode, false,
			HyperparameterTypeInt, HyperparameterTypeFloat, HyperparameterTypeDisc, HyperparameterTypeCat)
		c.str(p+"hyperparameterSpecifiedValues", s.HyperparameterSpecifiedValues, false, MaxSpecifiedValuesLen)
		c.ps = append(c.ps, HyperparameterSpecRules(i, s, grid)...)
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

// whole checks that a bound of type t is a whole number.
func (c *checker) whole(path string, v *float64, t string) {
	if v != nil && *v != math.Trunc(*v) {
		c.add(path, "must be a whole number for type %s (got %g)", t, *v)
	}
}

// dataStorage applies DataStorageRequired to a training's or tuning's
// inputs and bounds the size when given.
func (c *checker) dataStorage(size int, sourceDir, checkpointIn string, ds []Dataset) {
	inputs := []StorageInput{{"source_dir_uri", sourceDir}, {"check_point_input_uri", checkpointIn}}
	for i, d := range ds {
		inputs = append(inputs, StorageInput{fmt.Sprintf("dataset_list[%d].dataUri", i), d.DataURI})
	}
	c.ps = append(c.ps, DataStorageRequired(size, inputs...)...)
	c.storage("data_storage_size", size, false)
}

// torchrun: nproc_per_node is only taken with use_torchrun.
func (c *checker) torchrun(use bool, nproc int) {
	switch {
	case nproc < 0:
		c.add("nproc_per_node", "must be at least 1 (got %d)", nproc)
	case NprocWithoutTorchrun(use, nproc):
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
	c.ps = append(c.ps, AlgorithmChoice("algorithm_id", algorithmID, sourceDir, entryPoint)...)
}

func (c *checker) resources(rs []ModelResource) {
	switch {
	case len(rs) == 0:
		c.add("endpoint_model_resource_list", "is required (1 to %d elements)", MaxModelResources)
	case len(rs) > MaxModelResources:
		c.add("endpoint_model_resource_list", "must have at most %d elements (got %d)", MaxModelResources, len(rs))
	}
	for i, r := range rs {
		p := fmt.Sprintf("endpoint_model_resource_list[%d].", i)
		c.str(p+"modelId", r.ModelID, true, MaxIDLen)
		c.str(p+"apigwResourceUri", r.APIGWResourceURI, true, MaxURILen)
		if r.APIGWResourceURI != "" && !strings.HasPrefix(r.APIGWResourceURI, "/") {
			c.add(p+"apigwResourceUri", "must start with / (got %q)", r.APIGWResourceURI)
		}
		c.between(p+"podCount", r.PodCount, 1, MaxPods)
		c.str(p+"description", r.Description, false, MaxDescriptionLen)
	}
	c.ps = append(c.ps, RepeatedResourceURIs(rs)...)
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
	c.between("distributed_node_count", r.DistributedNodeCount, 1, MaxNodes)
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
	c.between("distributed_node_count", r.DistributedNodeCount, 1, MaxNodes)
	c.between("parallel_trial_count", r.ParallelTrialCount, 1, MaxParallelTrials)
	c.ps = append(c.ps, NodesTimesTrials(r.DistributedNodeCount, r.ParallelTrialCount)...)
	c.torchrun(r.UseTorchrun, r.NprocPerNode)
	c.dataStorage(r.DataStorageSize, r.SourceDirURI, r.CheckPointInputURI, r.DatasetList)
	c.algorithm(r.AlgorithmID, r.SourceDirURI, r.EntryPoint)
	c.uris(true, "model_upload_uri", r.ModelUploadURI)
	c.uris(false, "check_point_input_uri", r.CheckPointInputURI, "check_point_upload_uri", r.CheckPointUploadURI)
	c.optBetween("timeout_hours", r.TimeoutHours, 1, MaxTimeoutHours)
	c.specs(r.HyperparameterSpecList, r.TuningStrategyName == StrategyGrid)
	c.datasets(r.DatasetList)
	if len(r.MetricList) > MaxMetrics {
		c.add("metric_list", "must have at most %d elements (got %d)", MaxMetrics, len(r.MetricList))
	}
	if r.AlgorithmID == "" {
		c.ps = append(c.ps, OwnAlgorithmObjective(r.MetricList, r.ObjectiveMetricName, r.ObjectiveTypeCode)...)
	}
	c.str("metric_regex", r.MetricRegex, false, MaxMetricRegexLen)
	c.str("objective_metric_name", r.ObjectiveMetricName, false, MaxObjectiveMetricNameLen)
	c.ps = append(c.ps, ObjectiveInMetrics(r.MetricList, r.ObjectiveMetricName)...)
	c.oneOf("objective_type_code", r.ObjectiveTypeCode, false, ObjectiveMinimize, ObjectiveMaximize)
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
	c.optBetween("endpoint_instance_count", r.EndpointInstanceCount, 1, MaxInstances)
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
	c.optBetween("endpoint_instance_count", r.EndpointInstanceCount, 1, MaxInstances)
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
	c.between("instance_count", r.InstanceCount, 1, MaxInstances)
	c.optBetween("timeout_hours", r.TimeoutHours, 1, MaxTimeoutHours)
	c.between("pod_count", r.PodCount, 1, MaxPods)
	c.between("batch_size", r.BatchSize, 1, MaxBatchSize)
	c.between("inference_timeout_seconds", r.InferenceTimeoutSeconds, 1, MaxInferenceTimeoutSeconds)
	c.uris(true, "input_data_uri", r.InputDataURI)
	c.oneOf("input_data_type", r.InputDataType, true, InputDataTypeJSON, InputDataTypeJSONL)
	c.str("include_glob_pattern", r.IncludeGlobPattern, false, MaxURILen)
	c.str("exclude_glob_pattern", r.ExcludeGlobPattern, false, MaxURILen)
	c.uris(true, "output_upload_uri", r.OutputUploadURI)
	c.storage("data_storage_size", r.DataStorageSize, true)
	c.tags(r.TagList)
	return c.ps
}
