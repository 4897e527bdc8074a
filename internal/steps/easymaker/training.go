package easymaker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// algorithmParams choose a provided algorithm or an own one, with the
// storage and runtime options trainings and tunings share.
type algorithmParams struct {
	UseTorchrun         bool      `json:"use_torchrun" default:"false" desc:"run with torchrun (PyTorch images only)"`
	NprocPerNode        int       `json:"nproc_per_node" min:"1" desc:"processes per node, 1 to the number of CPUs or GPUs; only with use_torchrun (default 1 there)"`
	DataStorageSize     int       `json:"data_storage_size" min:"300" max:"10000" desc:"GB of storage for the data, 300 to 10000; required when a dataset, source_dir_uri or check_point_input_uri is in object storage (obs://), not needed with NAS (nas://)"`
	AlgorithmName       string    `json:"algorithm_name" maxlen:"64" desc:"a provided algorithm (easymaker.list what: algorithms); or give source_dir_uri and entry_point"`
	SourceDirURI        string    `json:"source_dir_uri" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"own algorithm: obs:// or nas:// directory with the training files, up to 255 characters"`
	EntryPoint          string    `json:"entry_point" maxlen:"255" desc:"own algorithm: the first Python file run in source_dir_uri, up to 255 characters"`
	ModelUploadURI      string    `json:"model_upload_uri" required:"true" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path the trained model is uploaded to, up to 255 characters"`
	CheckPointInputURI  string    `json:"check_point_input_uri" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path of a checkpoint to start from"`
	CheckPointUploadURI string    `json:"check_point_upload_uri" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path checkpoints are uploaded to"`
	TimeoutHours        int       `json:"timeout_hours" default:"720" min:"1" max:"720" desc:"the service stops the run after this many hours, 1 to 720"`
	DatasetList         []Dataset `json:"dataset_list" maxlen:"10" desc:"up to 10 datasets: datasetName (up to 36) and dataUri (obs:// or nas://, up to 255)"`
	TagList             []Tag     `json:"tag_list" maxlen:"10" desc:"up to 10 tags"`
	UseLog              bool      `json:"use_log" default:"false" desc:"leave the logs in the log search service"`
}

// check runs the cross-field rules trainings and tunings share.
func (a *algorithmParams) check(ps *problems, dyn map[string]bool) {
	ps.checkAlgorithm(dyn, a.AlgorithmName, a.SourceDirURI, a.EntryPoint)
	ps.checkTorchrun(dyn, a.UseTorchrun, a.NprocPerNode)
	ps.checkDatasets(dyn, a.DatasetList)
	ps.checkDatasetPaths(dyn, a.DatasetList)
	inputs := []easymaker.StorageInput{{Param: "source_dir_uri", URI: a.SourceDirURI}, {Param: "check_point_input_uri", URI: a.CheckPointInputURI}}
	for i, d := range a.DatasetList {
		inputs = append(inputs, easymaker.StorageInput{Param: fmt.Sprintf("dataset_list[%d].%s", i, d.param()), URI: d.uri()})
	}
	ps.checkStorage(dyn, a.DataStorageSize, inputs, "source_dir_uri", "check_point_input_uri", "dataset_list")
}

func (a *algorithmParams) nproc() int {
	if a.UseTorchrun && a.NprocPerNode == 0 {
		return 1
	}
	return a.NprocPerNode
}

// resolved are the IDs of the names a training or tuning gives.
type resolved struct{ image, flavor, algorithm string }

// resolveNames turns image, instance and algorithm names into IDs.
// The errors name the params (imageField, instanceField) and the choices.
func resolveNames(ctx context.Context, cl *easymaker.Client, imageField, image, instanceField, instance, algorithm string) (resolved, error) {
	var r resolved
	var err error
	if r.image, err = cl.ResolveImage(ctx, image); err != nil {
		return r, fmt.Errorf("%s: %w", imageField, err)
	}
	if r.flavor, err = cl.ResolveFlavor(ctx, instance); err != nil {
		return r, fmt.Errorf("%s: %w", instanceField, err)
	}
	if algorithm != "" {
		if r.algorithm, err = cl.ResolveAlgorithm(ctx, algorithm); err != nil {
			return r, fmt.Errorf("algorithm_name: %w", err)
		}
	}
	return r, nil
}

// planNames are the resolution calls a plan shows and the placeholders
// it puts in the body.
func planNames(image, instance, algorithm string) ([]steps.PlannedCall, resolved) {
	calls := []steps.PlannedCall{
		{Method: http.MethodGet, Path: apiPath("images"), Note: fmt.Sprintf("resolves image %q to its ID", image)},
		{Method: http.MethodGet, Path: apiPath("flavors"), Note: fmt.Sprintf("resolves instance type %q to its ID", instance)},
	}
	r := resolved{image: "{id of image " + image + "}", flavor: "{id of instance type " + instance + "}"}
	if algorithm != "" {
		calls = append(calls, steps.PlannedCall{Method: http.MethodGet, Path: apiPath("algorithms"), Note: fmt.Sprintf("resolves algorithm %q to its ID", algorithm)})
		r.algorithm = "{id of algorithm " + algorithm + "}"
	}
	return calls, r
}

// ---- easymaker.training.run -------------------------------------------------

type trainingRunParams struct {
	connParam
	ExperimentID         string           `json:"experiment_id" required:"true" maxlen:"36" desc:"ID of the experiment the training belongs to"`
	TrainingName         string           `json:"training_name" required:"true" maxlen:"50" desc:"training name, up to 50 characters"`
	TrainingDescription  string           `json:"training_description" maxlen:"255" desc:"up to 255 characters"`
	TrainImageName       string           `json:"train_image_name" required:"true" desc:"image name (easymaker.list what: images)"`
	TrainInstanceName    string           `json:"train_instance_name" required:"true" desc:"instance type name (easymaker.list what: instances)"`
	DistributedNodeCount int              `json:"distributed_node_count" required:"true" min:"1" max:"10" desc:"number of nodes of distributed training, 1 to 10"`
	HyperparameterList   []Hyperparameter `json:"hyperparameter_list" maxlen:"100" desc:"up to 100 hyperparameters: hyperparameterKey (up to 255) and hyperparameterValue (a string, up to 1000)"`
	algorithmParams
	waitParams
}

func checkTrainingRun(p *trainingRunParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	p.algorithmParams.check(&ps, dyn)
	return ps
}

func trainingRequest(p *trainingRunParams, r resolved) easymaker.CreateTrainingRequest {
	return easymaker.CreateTrainingRequest{
		ExperimentID: p.ExperimentID, TrainingName: p.TrainingName, TrainingDescription: p.TrainingDescription,
		ImageID: r.image, FlavorID: r.flavor, AlgorithmID: r.algorithm,
		DistributedNodeCount: p.DistributedNodeCount, UseTorchrun: p.UseTorchrun, NprocPerNode: p.nproc(),
		DataStorageSize: p.DataStorageSize, SourceDirURI: p.SourceDirURI, EntryPoint: p.EntryPoint,
		ModelUploadURI: p.ModelUploadURI, CheckPointInputURI: p.CheckPointInputURI, CheckPointUploadURI: p.CheckPointUploadURI,
		TimeoutHours: p.TimeoutHours, HyperparameterList: hyperparameters(p.HyperparameterList),
		DatasetList: datasets(p.DatasetList), TagList: tags(p.TagList), UseLog: p.UseLog,
	}
}

func trainingSnapshot(t *easymaker.Training) snapshot {
	return snapshot{Status: t.TrainingStatusCode, Reason: t.StatusReason, Outputs: steps.Outputs{
		"training_id": t.TrainingID, "training_name": t.TrainingName, "experiment_id": t.ExperimentID,
		"status": t.TrainingStatusCode, "status_reason": t.StatusReason, "metrics": metricMap(t.MetricList)}}
}

var trainings = resource[easymaker.Training]{func(x *easymaker.Training) string { return x.TrainingID }, trainingSnapshot}

func trainingCreation(c *steps.Call, p *trainingRunParams) creation {
	return creation{what: "training", conn: p.Connection, wait: p.waitParams, timeoutHours: p.TimeoutHours,
		read: trainings.reader((*easymaker.Client).GetTraining),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			r, err := resolveNames(ctx, cl, "train_image_name", p.TrainImageName, "train_instance_name", p.TrainInstanceName, p.AlgorithmName)
			if err != nil {
				return "", snapshot{}, err
			}
			return trainings.created(cl.CreateTraining(ctx, trainingRequest(p, r)))
		}}
}

func findTraining(ctx context.Context, cl *easymaker.Client, p *trainingRunParams) (*adoption, error) {
	return trainings.adopt(cl.FindTrainingByName(ctx, p.ExperimentID, p.TrainingName))
}

// ---- easymaker.training.delete ----------------------------------------------

type trainingDeleteParams struct {
	connParam
	TrainingID string `json:"training_id" required:"true" maxlen:"36" desc:"ID of the training to delete"`
}

func init() {
	steps.Register(steps.Define(steps.Def[trainingRunParams]{
		Type: "easymaker.training.run",
		Summary: "Run a training (Training().run; POST /trainings). Image, instance and algorithm names are resolved to IDs; " +
			"with wait, the step ends when the training is COMPLETE and fails when its status contains FAIL or STOP.",
		Example: map[string]any{
			"experiment_id": "exp-1", "training_name": "mnist", "train_image_name": "Ubuntu 22.04 CPU TensorFlow Training",
			"train_instance_name": "c2.c4m8", "distributed_node_count": 1, "algorithm_name": "Image Classification",
			"model_upload_uri":    "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/models/mnist",
			"hyperparameter_list": []any{map[string]any{"hyperparameterKey": "epochs", "hyperparameterValue": "10"}},
		},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "training_id", Type: "string", Description: "the training's ID"},
			{Name: "training_name", Type: "string", Description: "its name"},
			{Name: "experiment_id", Type: "string", Description: "its experiment"},
			{Name: "status", Type: "string", Description: "its status (COMPLETE when waited)"},
			{Name: "status_reason", Type: "string", Description: "the service's reason for the status, if any"},
			{Name: "metrics", Type: "map", Description: "final metric values by metric name (once COMPLETE)"},
			adoptedOutput,
		},
		Check: checkTrainingRun,
		Plan: func(p *trainingRunParams) []steps.PlannedCall {
			calls, r := planNames(p.TrainImageName, p.TrainInstanceName, p.AlgorithmName)
			return append(calls, steps.PlannedCall{Method: http.MethodPost, Path: apiPath("trainings"),
				Body: trainingRequest(p, r), Note: waitNote(p.waitParams, p.TimeoutHours, "COMPLETE")})
		},
		Reconcile: reconcileBy(trainingCreation, findTraining),
		Run: func(ctx context.Context, c *steps.Call, p *trainingRunParams) (steps.Outputs, error) {
			return runCreate(ctx, c, trainingCreation(c, p))
		},
	}))
	steps.Register(steps.Define(steps.Def[trainingDeleteParams]{
		Type:     "easymaker.training.delete",
		Summary:  "Delete a training (Training().delete; DELETE /trainings/{id}). A training already gone counts as deleted.",
		Example:  map[string]any{"training_id": "trn-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *trainingDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("trainings", p.TrainingID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *trainingDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "training", p.TrainingID, (*easymaker.Client).DeleteTraining)
		},
	}))
}
