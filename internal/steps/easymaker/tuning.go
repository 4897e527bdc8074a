package easymaker

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// defaultMetricRegex is the SDK's metric_regex, used with an own algorithm
// when none is given.
const defaultMetricRegex = `([\w\ -]+)\s*=\s([+-]?\d(.\d+)?([Ee][+-]?\d+)?)`

// HyperparameterSpec is one element of hyperparameter_spec_list.
type HyperparameterSpec struct {
	HyperparameterName            string   `json:"hyperparameterName" maxlen:"255" desc:"hyperparameter name, up to 255 characters"`
	HyperparameterTypeCode        string   `json:"hyperparameterTypeCode" enum:"INT,DOUBLE,DISCRETE,CATEGORICAL" desc:"INT, DOUBLE, DISCRETE or CATEGORICAL"`
	HyperparameterMinValue        *float64 `json:"hyperparameterMinValue" desc:"lower bound; required for INT and DOUBLE"`
	HyperparameterMaxValue        *float64 `json:"hyperparameterMaxValue" desc:"upper bound (not below the lower); required for INT and DOUBLE"`
	HyperparameterStep            *float64 `json:"hyperparameterStep" desc:"step of change; required for INT and DOUBLE with the GRID strategy"`
	HyperparameterSpecifiedValues string   `json:"hyperparameterSpecifiedValues" maxlen:"3000" desc:"values separated by commas, up to 3000 characters; required for DISCRETE and CATEGORICAL"`
}

// ---- easymaker.tuning.run ---------------------------------------------------

type tuningRunParams struct {
	connParam
	ExperimentID                    string               `json:"experiment_id" required:"true" maxlen:"36" desc:"ID of the experiment the tuning belongs to"`
	HyperparameterTuningName        string               `json:"hyperparameter_tuning_name" required:"true" maxlen:"50" desc:"tuning name, up to 50 characters"`
	HyperparameterTuningDescription string               `json:"hyperparameter_tuning_description" maxlen:"255" desc:"up to 255 characters"`
	ImageName                       string               `json:"image_name" required:"true" desc:"image name (easymaker.list what: images)"`
	InstanceName                    string               `json:"instance_name" required:"true" desc:"instance type name (easymaker.list what: instances)"`
	DistributedNodeCount            int                  `json:"distributed_node_count" default:"1" min:"1" max:"10" desc:"nodes per trial, 1 to 10; times parallel_trial_count at most 10"`
	ParallelTrialCount              int                  `json:"parallel_trial_count" default:"1" min:"1" max:"10" desc:"trials run at once, 1 to 10; times distributed_node_count at most 10"`
	HyperparameterSpecList          []HyperparameterSpec `json:"hyperparameter_spec_list" maxlen:"100" desc:"up to 100 hyperparameters to search"`
	MetricList                      []string             `json:"metric_list" maxlen:"10" desc:"own algorithm (required there): up to 10 metric names collected from the training logs"`
	MetricRegex                     string               `json:"metric_regex" maxlen:"255" desc:"own algorithm: regular expression that reads metrics from the logs, up to 255 characters (default the SDK's ([\\w\\ -]+)\\s*=\\s([+-]?\\d(.\\d+)?([Ee][+-]?\\d+)?))"`
	ObjectiveMetricName             string               `json:"objective_metric_name" maxlen:"36" desc:"own algorithm (required there): the metric to optimise, one of metric_list, up to 36 characters"`
	ObjectiveTypeCode               string               `json:"objective_type_code" enum:"MINIMIZE,MAXIMIZE" desc:"own algorithm (required there): MINIMIZE or MAXIMIZE"`
	ObjectiveGoal                   *float64             `json:"objective_goal" desc:"the tuning ends when the objective metric reaches it"`
	MaxFailedTrialCount             int                  `json:"max_failed_trial_count" min:"1" desc:"the tuning fails when this many trainings failed"`
	MaxTrialCount                   int                  `json:"max_trial_count" min:"1" desc:"the tuning runs until this many trainings ran"`
	TuningStrategyName              string               `json:"tuning_strategy_name" required:"true" enum:"BAYESIAN_OPTIMIZATION,GRID,RANDOM" desc:"search strategy: BAYESIAN_OPTIMIZATION, GRID or RANDOM (the spec names Bayesian and a grid strategy; RANDOM is the service's third)"`
	TuningStrategyRandomState       *int                 `json:"tuning_strategy_random_state" desc:"a fixed value gives reproducible results"`
	EarlyStoppingAlgorithm          string               `json:"early_stopping_algorithm" required:"true" enum:"MEDIAN" desc:"early stopping algorithm: MEDIAN"`
	EarlyStoppingMinTrialCount      int                  `json:"early_stopping_min_trial_count" default:"3" min:"1" desc:"trainings whose metric values feed the median"`
	EarlyStoppingStartStep          int                  `json:"early_stopping_start_step" default:"4" min:"1" desc:"training step from which early stopping applies"`
	algorithmParams
	waitParams
}

func (p *tuningRunParams) own() bool { return p.SourceDirURI != "" || p.EntryPoint != "" }

func checkTuningRun(p *tuningRunParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	p.algorithmParams.check(&ps, dyn)
	if !dyn["distributed_node_count"] && !dyn["parallel_trial_count"] {
		ps = append(ps, easymaker.NodesTimesTrials(p.DistributedNodeCount, p.ParallelTrialCount)...)
	}
	if !dyn["source_dir_uri"] && !dyn["entry_point"] && !dyn["algorithm_name"] && p.own() {
		ps.known(dyn, easymaker.OwnAlgorithmObjective(p.MetricList, p.ObjectiveMetricName, p.ObjectiveTypeCode))
	}
	ps.checkMetrics(dyn, p.MetricList, p.ObjectiveMetricName)
	ps.checkSpecs(dyn, p.HyperparameterSpecList, p.TuningStrategyName == easymaker.StrategyGrid && !dyn["tuning_strategy_name"])
	return ps
}

// checkMetrics requires metric names and applies
// easymaker.ObjectiveInMetrics. A name computed by an expression may be
// the objective: only a list of known names is judged.
func (ps *problems) checkMetrics(dyn map[string]bool, metrics []string, objective string) {
	if dyn["metric_list"] {
		return
	}
	computed := false
	for i, m := range metrics {
		at := fmt.Sprintf("metric_list[%d]", i)
		switch {
		case dyn[at]:
			computed = true
		case strings.TrimSpace(m) == "":
			ps.add(at, "is empty: a metric name is required")
		}
	}
	if !computed && !dyn["objective_metric_name"] {
		*ps = append(*ps, easymaker.ObjectiveInMetrics(metrics, objective)...)
	}
}

// checkSpecs applies easymaker.HyperparameterSpecRules to each element of
// hyperparameter_spec_list (grid: the GRID strategy). An element or a
// field computed by an expression counts as given at load time; at run
// time its value is judged.
func (ps *problems) checkSpecs(dyn map[string]bool, ss []HyperparameterSpec, grid bool) {
	if dyn["hyperparameter_spec_list"] {
		return
	}
	for i, s := range ss {
		if !dyn[fmt.Sprintf("hyperparameter_spec_list[%d]", i)] {
			ps.known(dyn, easymaker.HyperparameterSpecRules(i, s.api(), grid))
		}
	}
}

func (s HyperparameterSpec) api() easymaker.HyperparameterSpec {
	return easymaker.HyperparameterSpec{HyperparameterName: s.HyperparameterName, HyperparameterTypeCode: s.HyperparameterTypeCode,
		HyperparameterMinValue: s.HyperparameterMinValue, HyperparameterMaxValue: s.HyperparameterMaxValue,
		HyperparameterStep: s.HyperparameterStep, HyperparameterSpecifiedValues: s.HyperparameterSpecifiedValues}
}

func specs(ss []HyperparameterSpec) []easymaker.HyperparameterSpec {
	if len(ss) == 0 {
		return nil
	}
	out := make([]easymaker.HyperparameterSpec, len(ss))
	for i, s := range ss {
		out[i] = s.api()
	}
	return out
}

func tuningRequest(p *tuningRunParams, r resolved) easymaker.CreateTuningRequest {
	regex := p.MetricRegex
	if regex == "" && p.own() {
		regex = defaultMetricRegex
	}
	return easymaker.CreateTuningRequest{
		ExperimentID: p.ExperimentID, HyperparameterTuningName: p.HyperparameterTuningName,
		HyperparameterTuningDescription: p.HyperparameterTuningDescription,
		ImageID:                         r.image, FlavorID: r.flavor, AlgorithmID: r.algorithm,
		DistributedNodeCount: p.DistributedNodeCount, ParallelTrialCount: p.ParallelTrialCount,
		UseTorchrun: p.UseTorchrun, NprocPerNode: p.nproc(), DataStorageSize: p.DataStorageSize,
		SourceDirURI: p.SourceDirURI, EntryPoint: p.EntryPoint, ModelUploadURI: p.ModelUploadURI,
		CheckPointInputURI: p.CheckPointInputURI, CheckPointUploadURI: p.CheckPointUploadURI,
		TimeoutHours: p.TimeoutHours, HyperparameterSpecList: specs(p.HyperparameterSpecList),
		DatasetList: datasets(p.DatasetList), MetricList: p.MetricList, MetricRegex: regex,
		ObjectiveMetricName: p.ObjectiveMetricName, ObjectiveTypeCode: p.ObjectiveTypeCode, ObjectiveGoal: p.ObjectiveGoal,
		MaxFailedTrialCount: p.MaxFailedTrialCount, MaxTrialCount: p.MaxTrialCount,
		TuningStrategyName: p.TuningStrategyName, TuningStrategyRandomState: p.TuningStrategyRandomState,
		EarlyStoppingAlgorithm: p.EarlyStoppingAlgorithm, EarlyStoppingMinTrialCount: p.EarlyStoppingMinTrialCount,
		EarlyStoppingStartStep: p.EarlyStoppingStartStep, TagList: tags(p.TagList), UseLog: p.UseLog,
	}
}

func tuningSnapshot(t *easymaker.HyperparameterTuning) snapshot {
	best := map[string]any{}
	for _, h := range t.BestHyperparameterList {
		best[h.HyperparameterKey] = h.HyperparameterValue
	}
	var objective any
	if t.BestObjectiveMetricValue != nil {
		objective = *t.BestObjectiveMetricValue
	}
	return snapshot{Status: t.HyperparameterTuningStatusCode, Reason: t.StatusReason, Outputs: steps.Outputs{
		"hyperparameter_tuning_id": t.HyperparameterTuningID, "hyperparameter_tuning_name": t.HyperparameterTuningName,
		"experiment_id": t.ExperimentID, "status": t.HyperparameterTuningStatusCode, "status_reason": t.StatusReason,
		"best_training_id": t.BestTrainingID, "best_metrics": metricMap(t.BestMetricList),
		"best_hyperparameters": best, "best_objective_metric_value": objective,
		"completed_trial_count": t.CompletedTrialCount, "failed_trial_count": t.FailedTrialCount,
		"early_stopped_trial_count": t.EarlyStoppedTrialCount}}
}

var tunings = resource[easymaker.HyperparameterTuning]{func(x *easymaker.HyperparameterTuning) string { return x.HyperparameterTuningID }, tuningSnapshot}

func tuningCreation(c *steps.Call, p *tuningRunParams) creation {
	return creation{what: "hyperparameter tuning", conn: p.Connection, wait: p.waitParams, timeoutHours: p.TimeoutHours,
		read: tunings.reader((*easymaker.Client).GetTuning),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			r, err := resolveNames(ctx, cl, "image_name", p.ImageName, "instance_name", p.InstanceName, p.AlgorithmName)
			if err != nil {
				return "", snapshot{}, err
			}
			return tunings.created(cl.CreateTuning(ctx, tuningRequest(p, r)))
		}}
}

func findTuning(ctx context.Context, cl *easymaker.Client, p *tuningRunParams) (*adoption, error) {
	return tunings.adopt(cl.FindTuningByName(ctx, p.ExperimentID, p.HyperparameterTuningName))
}

// ---- easymaker.tuning.delete ------------------------------------------------

type tuningDeleteParams struct {
	connParam
	HyperparameterTuningID string `json:"hyperparameter_tuning_id" required:"true" maxlen:"36" desc:"ID of the tuning to delete"`
}

func init() {
	steps.Register(steps.Define(steps.Def[tuningRunParams]{
		Type: "easymaker.tuning.run",
		Summary: "Run a hyperparameter tuning (HyperparameterTuning().run; POST /hyperparameter-tunings). With wait, the step ends " +
			"when the tuning is COMPLETE and gives its best training and that training's metrics.",
		Example: map[string]any{
			"experiment_id": "exp-1", "hyperparameter_tuning_name": "mnist-tune", "image_name": "Ubuntu 22.04 CPU TensorFlow Training",
			"instance_name": "c2.c4m8", "parallel_trial_count": 2,
			"source_dir_uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/src", "entry_point": "train.py",
			"data_storage_size": 300, "model_upload_uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/models/mnist-tune",
			"dataset_list": []any{map[string]any{"datasetName": "train", "dataUri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/dataset"}},
			"hyperparameter_spec_list": []any{
				map[string]any{"hyperparameterName": "learning_rate", "hyperparameterTypeCode": "DOUBLE", "hyperparameterMinValue": 0.001, "hyperparameterMaxValue": 0.1},
				map[string]any{"hyperparameterName": "optimizer", "hyperparameterTypeCode": "CATEGORICAL", "hyperparameterSpecifiedValues": "adam,sgd"},
			},
			"metric_list": []any{"val_loss", "accuracy"}, "objective_metric_name": "val_loss", "objective_type_code": "MINIMIZE",
			"max_trial_count": 4, "tuning_strategy_name": "BAYESIAN_OPTIMIZATION", "early_stopping_algorithm": "MEDIAN",
		},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "hyperparameter_tuning_id", Type: "string", Description: "the tuning's ID"},
			{Name: "hyperparameter_tuning_name", Type: "string", Description: "its name"},
			{Name: "experiment_id", Type: "string", Description: "its experiment"},
			{Name: "status", Type: "string", Description: "its status (COMPLETE when waited)"},
			{Name: "status_reason", Type: "string", Description: "the service's reason for the status, if any"},
			{Name: "best_training_id", Type: "string", Description: "ID of the best training (once COMPLETE)"},
			{Name: "best_metrics", Type: "map", Description: "the best training's metric values by name"},
			{Name: "best_hyperparameters", Type: "map", Description: "the best training's hyperparameters by name"},
			{Name: "best_objective_metric_value", Type: "any", Description: "the best value of the objective metric (null before COMPLETE)"},
			{Name: "completed_trial_count", Type: "integer", Description: "trainings that completed"},
			{Name: "failed_trial_count", Type: "integer", Description: "trainings that failed"},
			{Name: "early_stopped_trial_count", Type: "integer", Description: "trainings stopped early"},
			adoptedOutput,
		},
		Check: checkTuningRun,
		Plan: func(p *tuningRunParams) []steps.PlannedCall {
			calls, r := planNames(p.ImageName, p.InstanceName, p.AlgorithmName)
			return append(calls, steps.PlannedCall{Method: http.MethodPost, Path: apiPath("hyperparameter-tunings"),
				Body: tuningRequest(p, r), Note: waitNote(p.waitParams, p.TimeoutHours, "COMPLETE")})
		},
		Reconcile: reconcileBy(tuningCreation, findTuning),
		Run: func(ctx context.Context, c *steps.Call, p *tuningRunParams) (steps.Outputs, error) {
			return runCreate(ctx, c, tuningCreation(c, p))
		},
	}))
	steps.Register(steps.Define(steps.Def[tuningDeleteParams]{
		Type:     "easymaker.tuning.delete",
		Summary:  "Delete a hyperparameter tuning (HyperparameterTuning().delete). A tuning already gone counts as deleted.",
		Example:  map[string]any{"hyperparameter_tuning_id": "hpt-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *tuningDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("hyperparameter-tunings", p.HyperparameterTuningID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *tuningDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "hyperparameter tuning", p.HyperparameterTuningID, (*easymaker.Client).DeleteTuning)
		},
	}))
}
