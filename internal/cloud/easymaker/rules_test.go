package easymaker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	em "github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
)

func num(v float64) *float64 { return &v }

// findings renders problems as "path: message" lines.
func findings(ps []fault.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

func TestTheCrossFieldRules(t *testing.T) {
	nas := em.StorageInput{Param: "source_dir_uri", URI: "nas://share/src"}
	obs := em.StorageInput{Param: "dataset_list[0].dataUri", URI: "obs://h/v1/AUTH_t/c/d"}
	tests := []struct {
		name string
		got  []fault.Problem
		want []string
	}{
		{"10 nodes in all is the most a tuning runs", em.NodesTimesTrials(5, 2), nil},
		{"4 nodes x 3 trials is too many", em.NodesTimesTrials(4, 3),
			[]string{"parallel_trial_count: distributed_node_count x parallel_trial_count must be at most 10 (got 4 x 3 = 12)"}},
		{"NAS inputs need no data storage", em.DataStorageRequired(0, nas), nil},
		{"an object storage input needs data storage, named by its param", em.DataStorageRequired(0, nas, obs),
			[]string{"data_storage_size: is required (300 to 10000 GB) when data comes from object storage (dataset_list[0].dataUri is obs://h/v1/AUTH_t/c/d); it is not needed with NAS (nas://) paths"}},
		{"a given size satisfies object storage inputs", em.DataStorageRequired(300, obs), nil},
		{"a provided algorithm alone is a choice", em.AlgorithmChoice("algorithm_name", "Image Classification", "", ""), nil},
		{"an own algorithm alone is a choice", em.AlgorithmChoice("algorithm_id", "", "obs://s", "main.py"), nil},
		{"both algorithms are refused at the provided one", em.AlgorithmChoice("algorithm_name", "x", "obs://s", "main.py"),
			[]string{"algorithm_name: give either a provided algorithm (algorithm_name) or an own one (source_dir_uri and entry_point), not both"}},
		{"no algorithm is refused", em.AlgorithmChoice("algorithm_id", "", "", ""),
			[]string{"algorithm_id: is required unless an own algorithm is given (source_dir_uri and entry_point)"}},
		{"an entry point needs its directory", em.AlgorithmChoice("algorithm_id", "", "", "main.py"),
			[]string{"source_dir_uri: is required with entry_point (an own algorithm needs both)"}},
		{"a directory needs its entry point", em.AlgorithmChoice("algorithm_id", "", "obs://s", ""),
			[]string{"entry_point: is required with source_dir_uri (an own algorithm needs both)"}},
		{"an own algorithm's tuning needs its metrics and objective", em.OwnAlgorithmObjective(nil, "", ""), []string{
			"metric_list: is required with an own algorithm (source_dir_uri and entry_point): the metric names the training logs",
			"objective_metric_name: is required with an own algorithm: one of metric_list",
			"objective_type_code: is required with an own algorithm: MINIMIZE or MAXIMIZE"}},
		{"the objective is one of the metrics", em.ObjectiveInMetrics([]string{"val_loss", "accuracy"}, "f1"),
			[]string{`objective_metric_name: must be one of metric_list (val_loss, accuracy; got "f1")`}},
		{"an objective among the metrics passes", em.ObjectiveInMetrics([]string{"val_loss"}, "val_loss"), nil},
		{"a DOUBLE spec needs its bounds", em.HyperparameterSpecRules(2, em.HyperparameterSpec{HyperparameterTypeCode: "DOUBLE"}, false), []string{
			"hyperparameter_spec_list[2].hyperparameterMinValue: is required for type DOUBLE",
			"hyperparameter_spec_list[2].hyperparameterMaxValue: is required for type DOUBLE"}},
		{"GRID needs a step", em.HyperparameterSpecRules(0, em.HyperparameterSpec{HyperparameterTypeCode: "INT",
			HyperparameterMinValue: num(1), HyperparameterMaxValue: num(5)}, true),
			[]string{"hyperparameter_spec_list[0].hyperparameterStep: is required for type INT with the GRID strategy"}},
		{"bounds in the wrong order and a step that does not advance", em.HyperparameterSpecRules(0, em.HyperparameterSpec{HyperparameterTypeCode: "DOUBLE",
			HyperparameterMinValue: num(0.5), HyperparameterMaxValue: num(0.1), HyperparameterStep: num(0)}, false), []string{
			"hyperparameter_spec_list[0].hyperparameterMaxValue: must not be below hyperparameterMinValue (got min 0.5, max 0.1)",
			"hyperparameter_spec_list[0].hyperparameterStep: must be positive (got 0)"}},
		{"INT bounds are whole numbers", em.HyperparameterSpecRules(0, em.HyperparameterSpec{HyperparameterTypeCode: "INT",
			HyperparameterMinValue: num(1.5), HyperparameterMaxValue: num(5)}, false),
			[]string{"hyperparameter_spec_list[0].hyperparameterMinValue: must be a whole number for type INT (got 1.5)"}},
		{"CATEGORICAL needs its values", em.HyperparameterSpecRules(1, em.HyperparameterSpec{HyperparameterTypeCode: "CATEGORICAL"}, true),
			[]string{"hyperparameter_spec_list[1].hyperparameterSpecifiedValues: is required for type CATEGORICAL: values separated by commas"}},
		{"a resource path is served once", em.RepeatedResourceURIs([]em.ModelResource{{APIGWResourceURI: "/a"}, {APIGWResourceURI: "/b"}, {APIGWResourceURI: "/a"}}),
			[]string{"endpoint_model_resource_list[2].apigwResourceUri: repeats element 0 (/a)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, findings(tt.got))
		})
	}
	assert.True(t, em.NprocWithoutTorchrun(false, 2), "nproc_per_node without use_torchrun")
	assert.False(t, em.NprocWithoutTorchrun(true, 2), "nproc_per_node with use_torchrun")
	assert.False(t, em.NprocWithoutTorchrun(false, 0), "no nproc_per_node")
}

// TestTheSimulatorAndTheStepsShareTheTuningRules: a request breaking the
// product rule gets the rule's own finding from Problems.
func TestTheSimulatorAndTheStepsShareTheTuningRules(t *testing.T) {
	req := em.CreateTuningRequest{ExperimentID: "e", HyperparameterTuningName: "t", ImageID: "i", FlavorID: "f",
		AlgorithmID: "a", ModelUploadURI: "nas://m", DistributedNodeCount: 4, ParallelTrialCount: 3,
		TuningStrategyName: em.StrategyBayesian, EarlyStoppingAlgorithm: em.EarlyStoppingMedian}
	assert.Equal(t, em.NodesTimesTrials(4, 3), req.Problems())
}
