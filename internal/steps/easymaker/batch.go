package easymaker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// ---- easymaker.batch_inference.run ------------------------------------------

type batchRunParams struct {
	connParam
	BatchInferenceName      string `json:"batch_inference_name" required:"true" maxlen:"50" desc:"batch inference name, up to 50 characters"`
	InstanceCount           int    `json:"instance_count" required:"true" min:"1" max:"10" desc:"number of instances, 1 to 10"`
	TimeoutHours            int    `json:"timeout_hours" default:"720" min:"1" max:"720" desc:"the service stops the run after this many hours, 1 to 720"`
	InstanceName            string `json:"instance_name" required:"true" desc:"instance type name (easymaker.list what: instances)"`
	ModelName               string `json:"model_name" required:"true" maxlen:"50" desc:"name (or ID) of the model to run (easymaker.list what: models)"`
	PodCount                int    `json:"pod_count" required:"true" min:"1" max:"100" desc:"number of pods, 1 to 100"`
	BatchSize               int    `json:"batch_size" required:"true" min:"1" max:"1000" desc:"samples processed at once, 1 to 1000"`
	InferenceTimeoutSeconds int    `json:"inference_timeout_seconds" required:"true" min:"1" max:"1200" desc:"timeout of one inference, 1 to 1200 seconds"`
	InputDataURI            string `json:"input_data_uri" required:"true" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path of the input files, up to 255 characters"`
	InputDataType           string `json:"input_data_type" required:"true" enum:"JSON,JSONL" desc:"JSON or JSONL"`
	IncludeGlobPattern      string `json:"include_glob_pattern" maxlen:"255" desc:"only input files matching it, up to 255 characters"`
	ExcludeGlobPattern      string `json:"exclude_glob_pattern" maxlen:"255" desc:"leave out input files matching it, up to 255 characters"`
	OutputUploadURI         string `json:"output_upload_uri" required:"true" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path the results are uploaded to, up to 255 characters"`
	DataStorageSize         int    `json:"data_storage_size" required:"true" min:"300" max:"10000" desc:"GB of storage for the input data, 300 to 10000 (required by the spec's table for batch inference)"`
	Description             string `json:"description" maxlen:"255" desc:"up to 255 characters"`
	TagList                 []Tag  `json:"tag_list" maxlen:"10" desc:"up to 10 tags"`
	UseLog                  bool   `json:"use_log" default:"false" desc:"leave the logs in the log search service"`
	waitParams
}

func batchRequest(p *batchRunParams, flavorID, modelID string) easymaker.CreateBatchInferenceRequest {
	return easymaker.CreateBatchInferenceRequest{
		BatchInferenceName: p.BatchInferenceName, BatchInferenceDescription: p.Description, FlavorID: flavorID, ModelID: modelID,
		InstanceCount: p.InstanceCount, TimeoutHours: p.TimeoutHours, PodCount: p.PodCount, BatchSize: p.BatchSize,
		InferenceTimeoutSeconds: p.InferenceTimeoutSeconds, InputDataURI: p.InputDataURI, InputDataType: p.InputDataType,
		IncludeGlobPattern: p.IncludeGlobPattern, ExcludeGlobPattern: p.ExcludeGlobPattern, OutputUploadURI: p.OutputUploadURI,
		DataStorageSize: p.DataStorageSize, TagList: tags(p.TagList), UseLog: p.UseLog,
	}
}

func batchSnapshot(b *easymaker.BatchInference) snapshot {
	files := make([]any, len(b.OutputFileList))
	for i, f := range b.OutputFileList {
		files[i] = f
	}
	return snapshot{Status: b.BatchInferenceStatusCode, Reason: b.StatusReason, Outputs: steps.Outputs{
		"batch_inference_id": b.BatchInferenceID, "batch_inference_name": b.BatchInferenceName,
		"status": b.BatchInferenceStatusCode, "status_reason": b.StatusReason, "model_id": b.ModelID,
		"input_file_count": b.InputFileCount, "inference_count": b.InferenceCount, "output_files": files}}
}

var batches = resource[easymaker.BatchInference]{func(x *easymaker.BatchInference) string { return x.BatchInferenceID }, batchSnapshot}

// resolveModel returns the ID of the model named name (an ID is accepted).
func resolveModel(ctx context.Context, cl *easymaker.Client, name string) (string, error) {
	list, err := cl.ListModels(ctx)
	if err != nil {
		return "", fmt.Errorf("model_name: list models: %w", err)
	}
	var id string
	choices := make([]string, 0, len(list))
	for _, m := range list {
		if m.ModelID == name {
			return m.ModelID, nil
		}
		if m.ModelName == name && id == "" {
			id = m.ModelID
		}
		choices = append(choices, m.ModelName)
	}
	if id == "" {
		return "", &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("model_name: model %q does not exist; choices: %v", name, choices),
			Data: map[string]any{"choices": choices}}
	}
	return id, nil
}

func batchCreation(_ *steps.Call, p *batchRunParams) creation {
	return creation{what: "batch inference", conn: p.Connection, wait: p.waitParams, timeoutHours: p.TimeoutHours,
		read: batches.reader((*easymaker.Client).GetBatchInference),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			flavor, err := cl.ResolveFlavor(ctx, p.InstanceName)
			if err != nil {
				return "", snapshot{}, fmt.Errorf("instance_name: %w", err)
			}
			model, err := resolveModel(ctx, cl, p.ModelName)
			if err != nil {
				return "", snapshot{}, err
			}
			return batches.created(cl.CreateBatchInference(ctx, batchRequest(p, flavor, model)))
		}}
}

func findBatch(ctx context.Context, cl *easymaker.Client, p *batchRunParams) (*adoption, error) {
	return batches.adopt(cl.FindBatchInferenceByName(ctx, p.BatchInferenceName))
}

// ---- easymaker.batch_inference.delete ---------------------------------------

type batchDeleteParams struct {
	connParam
	BatchInferenceID string `json:"batch_inference_id" required:"true" maxlen:"36" desc:"ID of the batch inference to delete"`
}

func init() {
	steps.Register(steps.Define(steps.Def[batchRunParams]{
		Type: "easymaker.batch_inference.run",
		Summary: "Run a batch inference (BatchInference().run; POST /batch-inferences). With wait, the step ends when it is " +
			"COMPLETE and fails on FAIL_BATCH_INFERENCE.",
		Example: map[string]any{
			"batch_inference_name": "nightly-scoring", "instance_count": 1, "instance_name": "c2.c4m8", "model_name": "mnist",
			"pod_count": 1, "batch_size": 10, "inference_timeout_seconds": 60,
			"input_data_uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/in/", "input_data_type": "JSONL",
			"output_upload_uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/out/", "data_storage_size": 300,
		},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "batch_inference_id", Type: "string", Description: "the batch inference's ID"},
			{Name: "batch_inference_name", Type: "string", Description: "its name"},
			{Name: "status", Type: "string", Description: "its status (COMPLETE when waited)"},
			{Name: "status_reason", Type: "string", Description: "the service's reason for the status, if any"},
			{Name: "model_id", Type: "string", Description: "the model it ran"},
			{Name: "input_file_count", Type: "integer", Description: "input files read"},
			{Name: "inference_count", Type: "integer", Description: "inferences made"},
			{Name: "output_files", Type: "list", Description: "result files written under output_upload_uri"},
			adoptedOutput,
		},
		Plan: func(p *batchRunParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: apiPath("flavors"), Note: fmt.Sprintf("resolves instance type %q to its ID", p.InstanceName)},
				{Method: http.MethodGet, Path: apiPath("models"), Note: fmt.Sprintf("resolves model %q to its ID", p.ModelName)},
				{Method: http.MethodPost, Path: apiPath("batch-inferences"),
					Body: batchRequest(p, "{id of instance type "+p.InstanceName+"}", "{id of model "+p.ModelName+"}"), Note: waitNote(p.waitParams, p.TimeoutHours, "COMPLETE")},
			}
		},
		Reconcile: reconcileBy(batchCreation, findBatch),
		Run: func(ctx context.Context, c *steps.Call, p *batchRunParams) (steps.Outputs, error) {
			return runCreate(ctx, c, batchCreation(c, p))
		},
	}))
	steps.Register(steps.Define(steps.Def[batchDeleteParams]{
		Type:     "easymaker.batch_inference.delete",
		Summary:  "Delete a batch inference (BatchInference().delete). One already gone counts as deleted.",
		Example:  map[string]any{"batch_inference_id": "bi-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *batchDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("batch-inferences", p.BatchInferenceID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *batchDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "batch inference", p.BatchInferenceID, (*easymaker.Client).DeleteBatchInference)
		},
	}))
}
