package easymaker

import (
	"context"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// modelCommon are the params of both model creates.
type modelCommon struct {
	ModelName        string `json:"model_name" required:"true" maxlen:"50" desc:"model name, up to 50 characters"`
	ModelDescription string `json:"model_description" maxlen:"255" desc:"up to 255 characters"`
	TagList          []Tag  `json:"tag_list" maxlen:"10" desc:"up to 10 tags"`
}

// ---- easymaker.model.create -------------------------------------------------

type modelCreateParams struct {
	connParam
	TrainingID             string `json:"training_id" maxlen:"36" desc:"the training whose model to register (or give hyperparameter_tuning_id)"`
	HyperparameterTuningID string `json:"hyperparameter_tuning_id" maxlen:"36" desc:"the tuning whose best training's model to register (or give training_id)"`
	modelCommon
	waitParams
}

func checkModelCreate(p *modelCreateParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	if dyn["training_id"] || dyn["hyperparameter_tuning_id"] {
		return nil
	}
	switch {
	case p.TrainingID != "" && p.HyperparameterTuningID != "":
		ps.add("hyperparameter_tuning_id", "give training_id or hyperparameter_tuning_id, not both")
	case p.TrainingID == "" && p.HyperparameterTuningID == "":
		ps.add("training_id", "is required unless hyperparameter_tuning_id is given (the model of a training, or of a tuning's best training)")
	}
	return ps
}

// ---- easymaker.model.create_from_uri ----------------------------------------

type modelFromURIParams struct {
	connParam
	FrameworkCode string `json:"framework_code" required:"true" enum:"TENSORFLOW,PYTORCH" desc:"the model's framework: TENSORFLOW or PYTORCH"`
	ModelURI      string `json:"model_uri" required:"true" maxlen:"255" pattern:"^(obs|nas)://\\S+$" desc:"obs:// or nas:// path of the model files, up to 255 characters"`
	modelCommon
	waitParams
}

func modelSnapshot(m *easymaker.Model) snapshot {
	return snapshot{Status: m.ModelStatusCode, Reason: m.StatusReason, Outputs: steps.Outputs{
		"model_id": m.ModelID, "model_name": m.ModelName, "status": m.ModelStatusCode,
		"training_id": m.TrainingID, "hyperparameter_tuning_id": m.HyperparameterTuningID,
		"framework_code": m.FrameworkCode, "model_uri": m.ModelURI}}
}

var models = resource[easymaker.Model]{func(x *easymaker.Model) string { return x.ModelID }, modelSnapshot}

func modelCreation(conn string, w waitParams, req easymaker.CreateModelRequest) creation {
	return creation{what: "model", conn: conn, wait: w, read: models.reader((*easymaker.Client).GetModel),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			return models.created(cl.CreateModel(ctx, req))
		}}
}

func findModel(ctx context.Context, cl *easymaker.Client, name string) (*adoption, error) {
	return models.adopt(cl.FindModelByName(ctx, name))
}

func modelRequest(p *modelCreateParams) easymaker.CreateModelRequest {
	return easymaker.CreateModelRequest{ModelName: p.ModelName, ModelDescription: p.ModelDescription,
		TrainingID: p.TrainingID, HyperparameterTuningID: p.HyperparameterTuningID, TagList: tags(p.TagList)}
}

func modelFromURIRequest(p *modelFromURIParams) easymaker.CreateModelRequest {
	return easymaker.CreateModelRequest{ModelName: p.ModelName, ModelDescription: p.ModelDescription,
		FrameworkCode: p.FrameworkCode, ModelURI: p.ModelURI, TagList: tags(p.TagList)}
}

// ---- easymaker.model.delete -------------------------------------------------

type modelDeleteParams struct {
	connParam
	ModelID string `json:"model_id" required:"true" maxlen:"36" desc:"ID of the model to delete"`
}

var modelOutputs = []steps.Output{
	{Name: "model_id", Type: "string", Description: "the model's ID"},
	{Name: "model_name", Type: "string", Description: "its name"},
	{Name: "status", Type: "string", Description: "its status (ACTIVE when waited)"},
	{Name: "training_id", Type: "string", Description: "the training it came from (\"\" for a URI)"},
	{Name: "hyperparameter_tuning_id", Type: "string", Description: "the tuning it came from, if any"},
	{Name: "framework_code", Type: "string", Description: "TENSORFLOW or PYTORCH, when known"},
	{Name: "model_uri", Type: "string", Description: "where the model files are, when known"},
	adoptedOutput,
}

func init() {
	steps.Register(steps.Define(steps.Def[modelCreateParams]{
		Type: "easymaker.model.create",
		Summary: "Register a model from a training or from a tuning's best training (Model().create; POST /models). " +
			"With wait, the step ends when the model is ACTIVE.",
		Example:  map[string]any{"training_id": "trn-1", "model_name": "mnist"},
		Mutating: true,
		Outputs:  modelOutputs,
		Check:    checkModelCreate,
		Plan: func(p *modelCreateParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: apiPath("models"), Body: modelRequest(p), Note: waitNote(p.waitParams, 0, "ACTIVE")}}
		},
		Reconcile: reconcileBy(func(_ *steps.Call, p *modelCreateParams) creation {
			return modelCreation(p.Connection, p.waitParams, modelRequest(p))
		}, func(ctx context.Context, cl *easymaker.Client, p *modelCreateParams) (*adoption, error) {
			return findModel(ctx, cl, p.ModelName)
		}),
		Run: func(ctx context.Context, c *steps.Call, p *modelCreateParams) (steps.Outputs, error) {
			return runCreate(ctx, c, modelCreation(p.Connection, p.waitParams, modelRequest(p)))
		},
	}))
	steps.Register(steps.Define(steps.Def[modelFromURIParams]{
		Type: "easymaker.model.create_from_uri",
		Summary: "Register a model from files in storage (Model().create_by_model_uri; POST /models). " +
			"With wait, the step ends when the model is ACTIVE.",
		Example: map[string]any{"framework_code": "PYTORCH", "model_name": "mnist",
			"model_uri": "obs://kr1-api-object-storage.nhncloudservice.com/v1/AUTH_tenant/ml/model"},
		Mutating: true,
		Outputs:  modelOutputs,
		Plan: func(p *modelFromURIParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: apiPath("models"), Body: modelFromURIRequest(p), Note: waitNote(p.waitParams, 0, "ACTIVE")}}
		},
		Reconcile: reconcileBy(func(_ *steps.Call, p *modelFromURIParams) creation {
			return modelCreation(p.Connection, p.waitParams, modelFromURIRequest(p))
		}, func(ctx context.Context, cl *easymaker.Client, p *modelFromURIParams) (*adoption, error) {
			return findModel(ctx, cl, p.ModelName)
		}),
		Run: func(ctx context.Context, c *steps.Call, p *modelFromURIParams) (steps.Outputs, error) {
			return runCreate(ctx, c, modelCreation(p.Connection, p.waitParams, modelFromURIRequest(p)))
		},
	}))
	steps.Register(steps.Define(steps.Def[modelDeleteParams]{
		Type:     "easymaker.model.delete",
		Summary:  "Delete a model (Model().delete; DELETE /models/{id}). A model already gone counts as deleted.",
		Example:  map[string]any{"model_id": "mdl-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *modelDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("models", p.ModelID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *modelDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "model", p.ModelID, (*easymaker.Client).DeleteModel)
		},
	}))
}
