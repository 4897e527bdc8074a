package easymaker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// serving are the params of an endpoint's or a stage's serving resources.
type serving struct {
	EndpointInstanceName      string          `json:"endpoint_instance_name" required:"true" desc:"instance type name (easymaker.list what: instances)"`
	EndpointInstanceCount     int             `json:"endpoint_instance_count" default:"1" min:"1" max:"10" desc:"number of instances, 1 to 10"`
	EndpointModelResourceList []ModelResource `json:"endpoint_model_resource_list" required:"true" minlen:"1" maxlen:"10" desc:"1 to 10 models to serve: modelId, apigwResourceUri (starts with /), podCount (1 to 100), description"`
	TagList                   []Tag           `json:"tag_list" maxlen:"10" desc:"up to 10 tags"`
	UseLog                    bool            `json:"use_log" default:"false" desc:"leave the logs in the log search service"`
}

func checkServing(dyn map[string]bool, s *serving) []fault.Problem {
	var ps problems
	ps.checkResources(dyn, s.EndpointModelResourceList)
	return ps
}

// stageView is a stage as steps output it.
func stageView(s *easymaker.EndpointStage) steps.Outputs {
	models := make([]any, len(s.EndpointModelList))
	for i, m := range s.EndpointModelList {
		models[i] = map[string]any{"model_id": m.ModelID, "model_name": m.ModelName, "apigw_resource_uri": m.APIGWResourceURI,
			"pod_count": m.PodCount, "status": m.EndpointModelStatusCode}
	}
	return steps.Outputs{
		"endpoint_stage_id": s.EndpointStageID, "stage_name": s.EndpointStageName, "endpoint_id": s.EndpointID,
		"status": s.EndpointStageStatusCode, "status_reason": s.StatusReason, "default_stage": s.DefaultStage,
		"apigw_stage_url": s.APIGWStageURL, "endpoint_instance_count": s.EndpointInstanceCount, "models": models,
	}
}

var stageOutputs = []steps.Output{
	{Name: "endpoint_stage_id", Type: "string", Description: "the stage's ID"},
	{Name: "stage_name", Type: "string", Description: "its name"},
	{Name: "endpoint_id", Type: "string", Description: "its endpoint"},
	{Name: "status", Type: "string", Description: "its status (ACTIVE when waited)"},
	{Name: "status_reason", Type: "string", Description: "the service's reason for the status, if any"},
	{Name: "default_stage", Type: "boolean", Description: "whether it is the endpoint's default stage"},
	{Name: "apigw_stage_url", Type: "string", Description: "the stage's API gateway URL (predict posts to it + apigwResourceUri)"},
	{Name: "endpoint_instance_count", Type: "integer", Description: "its number of instances"},
	{Name: "models", Type: "list", Description: "the models it serves: model_id, model_name, apigw_resource_uri, pod_count, status"},
}

// ---- easymaker.endpoint.create ----------------------------------------------

type endpointCreateParams struct {
	connParam
	EndpointName        string `json:"endpoint_name" required:"true" maxlen:"50" desc:"endpoint name, up to 50 characters"`
	EndpointDescription string `json:"endpoint_description" maxlen:"255" desc:"up to 255 characters"`
	serving
	waitParams
}

func endpointRequest(p *endpointCreateParams, flavorID string) easymaker.CreateEndpointRequest {
	return easymaker.CreateEndpointRequest{EndpointName: p.EndpointName, EndpointDescription: p.EndpointDescription,
		FlavorID: flavorID, EndpointInstanceCount: p.EndpointInstanceCount,
		EndpointModelResourceList: modelResources(p.EndpointModelResourceList), TagList: tags(p.TagList), UseLog: p.UseLog}
}

// endpointSnapshot is the endpoint's snapshot; its default stage's status
// and URL stay empty until readEndpoint reads the stage.
func endpointSnapshot(e *easymaker.Endpoint) snapshot {
	return snapshot{Status: e.EndpointStatusCode, Reason: e.StatusReason, Outputs: steps.Outputs{
		"endpoint_id": e.EndpointID, "endpoint_name": e.EndpointName, "status": e.EndpointStatusCode,
		"default_stage_id": e.DefaultEndpointStageID, "stage_status": "", "apigw_stage_url": ""}}
}

var endpoints = resource[easymaker.Endpoint]{func(x *easymaker.Endpoint) string { return x.EndpointID }, endpointSnapshot}

// readEndpoint reads the endpoint and, once it is ACTIVE, its default
// stage: the wait ends when both are ACTIVE (the SDK's create waits for
// the default stage too). While the stage deploys, the snapshot carries
// the stage's status.
func readEndpoint(ctx context.Context, cl *easymaker.Client, id string) (snapshot, error) {
	e, err := cl.GetEndpoint(ctx, id)
	if err != nil {
		return snapshot{}, err
	}
	s := endpointSnapshot(e)
	if done, failed := easymaker.StatusDone(e.EndpointStatusCode); !done || failed {
		return s, nil
	}
	st, err := defaultStage(ctx, cl, e)
	if err != nil {
		return snapshot{}, err
	}
	s.Outputs["default_stage_id"], s.Outputs["stage_status"], s.Outputs["apigw_stage_url"] = st.EndpointStageID, st.EndpointStageStatusCode, st.APIGWStageURL
	s.Status = st.EndpointStageStatusCode
	if st.StatusReason != "" {
		s.Reason = "default stage " + st.EndpointStageID + ": " + st.StatusReason
	}
	return s, nil
}

func defaultStage(ctx context.Context, cl *easymaker.Client, e *easymaker.Endpoint) (*easymaker.EndpointStage, error) {
	if e.DefaultEndpointStageID != "" {
		return cl.GetStage(ctx, e.DefaultEndpointStageID)
	}
	return cl.DefaultStage(ctx, e.EndpointID)
}

func endpointCreation(_ *steps.Call, p *endpointCreateParams) creation {
	return creation{what: "endpoint", conn: p.Connection, wait: p.waitParams, read: readEndpoint,
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			flavor, err := cl.ResolveFlavor(ctx, p.EndpointInstanceName)
			if err != nil {
				return "", snapshot{}, fmt.Errorf("endpoint_instance_name: %w", err)
			}
			return endpoints.created(cl.CreateEndpoint(ctx, endpointRequest(p, flavor)))
		}}
}

func findEndpoint(ctx context.Context, cl *easymaker.Client, p *endpointCreateParams) (*adoption, error) {
	return endpoints.adopt(cl.FindEndpointByName(ctx, p.EndpointName))
}

// ---- easymaker.endpoint.create_stage ----------------------------------------

type stageCreateParams struct {
	connParam
	EndpointID       string `json:"endpoint_id" required:"true" maxlen:"36" desc:"ID of the endpoint to add the stage to"`
	StageName        string `json:"stage_name" required:"true" maxlen:"50" desc:"stage name, up to 50 characters (the SDK's code comment asks for up to 30 lower-case letters and digits)"`
	StageDescription string `json:"stage_description" maxlen:"255" desc:"up to 255 characters"`
	serving
	waitParams
}

func stageRequest(p *stageCreateParams, flavorID string) easymaker.CreateStageRequest {
	return easymaker.CreateStageRequest{EndpointID: p.EndpointID, EndpointStageName: p.StageName, EndpointStageDescription: p.StageDescription,
		FlavorID: flavorID, EndpointInstanceCount: p.EndpointInstanceCount,
		EndpointModelResourceList: modelResources(p.EndpointModelResourceList), TagList: tags(p.TagList), UseLog: p.UseLog}
}

func stageSnapshot(s *easymaker.EndpointStage) snapshot {
	return snapshot{Status: s.EndpointStageStatusCode, Reason: s.StatusReason, Outputs: stageView(s)}
}

var stages = resource[easymaker.EndpointStage]{func(x *easymaker.EndpointStage) string { return x.EndpointStageID }, stageSnapshot}

func stageCreation(_ *steps.Call, p *stageCreateParams) creation {
	return creation{what: "endpoint stage", conn: p.Connection, wait: p.waitParams,
		read: stages.reader((*easymaker.Client).GetStage),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			flavor, err := cl.ResolveFlavor(ctx, p.EndpointInstanceName)
			if err != nil {
				return "", snapshot{}, fmt.Errorf("endpoint_instance_name: %w", err)
			}
			return stages.created(cl.CreateStage(ctx, stageRequest(p, flavor)))
		}}
}

func findStage(ctx context.Context, cl *easymaker.Client, p *stageCreateParams) (*adoption, error) {
	return stages.adopt(cl.FindStageByName(ctx, p.EndpointID, p.StageName))
}

// ---- easymaker.endpoint.stage, easymaker.endpoint.default_stage -------------

type stageGetParams struct {
	connParam
	EndpointStageID string `json:"endpoint_stage_id" required:"true" maxlen:"36" desc:"the stage's ID"`
}

type defaultStageParams struct {
	connParam
	EndpointID string `json:"endpoint_id" required:"true" maxlen:"36" desc:"the endpoint's ID"`
}

// ---- easymaker.endpoint.predict ---------------------------------------------

type predictParams struct {
	connParam
	EndpointID      string `json:"endpoint_id" maxlen:"36" desc:"predict through this endpoint's default stage (or give endpoint_stage_id)"`
	EndpointStageID string `json:"endpoint_stage_id" maxlen:"36" desc:"predict through this stage (or give endpoint_id for the default stage)"`
	ModelID         string `json:"model_id" maxlen:"36" desc:"the model to ask; may be left out when the stage serves one model"`
	JSON            any    `json:"json" required:"true" desc:"the request payload, e.g. {instances: [[1.0, 2.0]]}"`
}

func checkPredict(p *predictParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	if dyn["endpoint_id"] || dyn["endpoint_stage_id"] {
		return nil
	}
	switch {
	case p.EndpointID != "" && p.EndpointStageID != "":
		ps.add("endpoint_stage_id", "give endpoint_id (its default stage) or endpoint_stage_id, not both")
	case p.EndpointID == "" && p.EndpointStageID == "":
		ps.add("endpoint_id", "is required unless endpoint_stage_id is given")
	}
	return ps
}

func predict(ctx context.Context, cl *easymaker.Client, p *predictParams) (steps.Outputs, error) {
	var st *easymaker.EndpointStage
	var err error
	if p.EndpointStageID != "" {
		st, err = cl.GetStage(ctx, p.EndpointStageID)
	} else {
		st, err = cl.DefaultStage(ctx, p.EndpointID)
	}
	if err != nil {
		return nil, fmt.Errorf("read the stage to predict with: %w", err)
	}
	if st.EndpointStageStatusCode != easymaker.StatusActive {
		return nil, fault.Errorf(fault.InProgress, "stage %s is %s; predict needs it ACTIVE", st.EndpointStageID, st.EndpointStageStatusCode)
	}
	model := p.ModelID
	if model == "" {
		if len(st.EndpointModelList) != 1 {
			ids := make([]string, len(st.EndpointModelList))
			for i, m := range st.EndpointModelList {
				ids[i] = m.ModelID
			}
			return nil, fault.Errorf(fault.Invalid, "model_id: stage %s serves %d models (%s); say which", st.EndpointStageID, len(ids), strings.Join(ids, ", "))
		}
		model = st.EndpointModelList[0].ModelID
	}
	uri, ok := st.ResourceURI(model)
	if !ok {
		return nil, fault.Errorf(fault.NotFound, "model_id: stage %s does not serve model %s", st.EndpointStageID, model)
	}
	raw, err := cl.Predict(ctx, st, uri, p.JSON)
	if err != nil {
		return nil, err
	}
	var answer any
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, &fault.Error{Code: fault.Failed, Message: "the model server's answer is not JSON", Err: err}
	}
	return steps.Outputs{"predictions": answer, "endpoint_stage_id": st.EndpointStageID, "model_id": model,
		"url": easymaker.StageURL(st.APIGWStageURL) + uri}, nil
}

// ---- easymaker.endpoint.delete, easymaker.endpoint.delete_stage -------------

type endpointDeleteParams struct {
	connParam
	EndpointID string `json:"endpoint_id" required:"true" maxlen:"36" desc:"ID of the endpoint to delete (with its stages)"`
}

type stageDeleteParams struct {
	connParam
	StageID string `json:"stage_id" required:"true" maxlen:"36" desc:"ID of the stage to delete (the default stage goes only with its endpoint)"`
}

func init() {
	steps.Register(steps.Define(steps.Def[endpointCreateParams]{
		Type: "easymaker.endpoint.create",
		Summary: "Create an endpoint with its default stage (Endpoint().create; POST /endpoints). With wait, the step ends " +
			"when the endpoint and its default stage are ACTIVE.",
		Example: map[string]any{"endpoint_name": "mnist", "endpoint_instance_name": "c2.c8m16",
			"endpoint_model_resource_list": []any{map[string]any{"modelId": "mdl-1", "apigwResourceUri": "/predict", "podCount": 1}}},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "endpoint_id", Type: "string", Description: "the endpoint's ID"},
			{Name: "endpoint_name", Type: "string", Description: "its name"},
			{Name: "status", Type: "string", Description: "the endpoint's status (ACTIVE when waited)"},
			{Name: "default_stage_id", Type: "string", Description: "ID of its default stage"},
			{Name: "stage_status", Type: "string", Description: "the default stage's status (ACTIVE when waited; \"\" before it is read)"},
			{Name: "apigw_stage_url", Type: "string", Description: "the default stage's API gateway URL (\"\" before it is read)"},
			adoptedOutput,
		},
		Check: func(p *endpointCreateParams, dyn map[string]bool) []fault.Problem {
			return checkServing(dyn, &p.serving)
		},
		Plan: func(p *endpointCreateParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: apiPath("flavors"), Note: fmt.Sprintf("resolves instance type %q to its ID", p.EndpointInstanceName)},
				{Method: http.MethodPost, Path: apiPath("endpoints"), Body: endpointRequest(p, "{id of instance type "+p.EndpointInstanceName+"}"),
					Note: waitNote(p.waitParams, 0, "it and its default stage are ACTIVE")},
			}
		},
		Reconcile: reconcileBy(endpointCreation, findEndpoint),
		Run: func(ctx context.Context, c *steps.Call, p *endpointCreateParams) (steps.Outputs, error) {
			return runCreate(ctx, c, endpointCreation(c, p))
		},
	}))
	steps.Register(steps.Define(steps.Def[stageCreateParams]{
		Type: "easymaker.endpoint.create_stage",
		Summary: "Add a stage to an endpoint (Endpoint().create_stage; POST /endpoint-stages). With wait, the step ends " +
			"when the stage is ACTIVE.",
		Example: map[string]any{"endpoint_id": "ep-1", "stage_name": "canary", "endpoint_instance_name": "c2.c8m16",
			"endpoint_model_resource_list": []any{map[string]any{"modelId": "mdl-2", "apigwResourceUri": "/predict", "podCount": 1}}},
		Mutating: true,
		Outputs:  append(append([]steps.Output{}, stageOutputs...), adoptedOutput),
		Check: func(p *stageCreateParams, dyn map[string]bool) []fault.Problem {
			return checkServing(dyn, &p.serving)
		},
		Plan: func(p *stageCreateParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: apiPath("flavors"), Note: fmt.Sprintf("resolves instance type %q to its ID", p.EndpointInstanceName)},
				{Method: http.MethodPost, Path: apiPath("endpoint-stages"), Body: stageRequest(p, "{id of instance type "+p.EndpointInstanceName+"}"),
					Note: waitNote(p.waitParams, 0, "ACTIVE")},
			}
		},
		Reconcile: reconcileBy(stageCreation, findStage),
		Run: func(ctx context.Context, c *steps.Call, p *stageCreateParams) (steps.Outputs, error) {
			return runCreate(ctx, c, stageCreation(c, p))
		},
	}))
	steps.Register(steps.Define(steps.Def[stageGetParams]{
		Type:    "easymaker.endpoint.stage",
		Summary: "Read a stage (Endpoint().get_endpoint_stage_by_id; GET /endpoint-stages/{id}).",
		Example: map[string]any{"endpoint_stage_id": "stg-1"},
		Outputs: stageOutputs,
		Plan: func(p *stageGetParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: apiPath("endpoint-stages", p.EndpointStageID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *stageGetParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *easymaker.Client) (steps.Outputs, error) {
				s, err := cl.GetStage(ctx, p.EndpointStageID)
				if err != nil {
					return nil, err
				}
				return stageView(s), nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[defaultStageParams]{
		Type:    "easymaker.endpoint.default_stage",
		Summary: "Read an endpoint's default stage (Endpoint().get_default_endpoint_stage; GET /endpoint-stages?endpointId=).",
		Example: map[string]any{"endpoint_id": "ep-1"},
		Outputs: stageOutputs,
		Plan: func(p *defaultStageParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: apiPath("endpoint-stages") + "?endpointId=" + p.EndpointID}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *defaultStageParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *easymaker.Client) (steps.Outputs, error) {
				s, err := cl.DefaultStage(ctx, p.EndpointID)
				if err != nil {
					return nil, err
				}
				return stageView(s), nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[predictParams]{
		Type: "easymaker.endpoint.predict",
		Summary: "Ask a model served by a stage (Endpoint().predict): POST {apigwStageUrl}{apigwResourceUri} with the JSON payload; " +
			"the answer is the model server's raw JSON.",
		Example: map[string]any{"endpoint_id": "ep-1", "json": map[string]any{"instances": []any{[]any{1.0, 2.0}}}},
		Outputs: []steps.Output{
			{Name: "predictions", Type: "any", Description: "the model server's answer, as JSON (e.g. {predictions: [...]})"},
			{Name: "endpoint_stage_id", Type: "string", Description: "the stage asked"},
			{Name: "model_id", Type: "string", Description: "the model asked"},
			{Name: "url", Type: "string", Description: "where the request went"},
		},
		Check: checkPredict,
		Plan: func(p *predictParams) []steps.PlannedCall {
			read := steps.PlannedCall{Method: http.MethodGet, Path: apiPath("endpoint-stages", p.EndpointStageID)}
			if p.EndpointStageID == "" {
				read = steps.PlannedCall{Method: http.MethodGet, Path: apiPath("endpoint-stages") + "?endpointId=" + p.EndpointID, Note: "finds the default stage"}
			}
			return []steps.PlannedCall{read, {Method: http.MethodPost, Path: "{apigwStageUrl}{apigwResourceUri}", Body: p.JSON, Note: "no auth header"}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *predictParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *easymaker.Client) (steps.Outputs, error) { return predict(ctx, cl, p) })
		},
	}))
	steps.Register(steps.Define(steps.Def[endpointDeleteParams]{
		Type:     "easymaker.endpoint.delete",
		Summary:  "Delete an endpoint and its stages (Endpoint().delete_endpoint). An endpoint already gone counts as deleted.",
		Example:  map[string]any{"endpoint_id": "ep-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *endpointDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("endpoints", p.EndpointID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *endpointDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "endpoint", p.EndpointID, (*easymaker.Client).DeleteEndpoint)
		},
	}))
	steps.Register(steps.Define(steps.Def[stageDeleteParams]{
		Type:     "easymaker.endpoint.delete_stage",
		Summary:  "Delete a stage (Endpoint().delete_endpoint_stage). A stage already gone counts as deleted.",
		Example:  map[string]any{"stage_id": "stg-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *stageDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("endpoint-stages", p.StageID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *stageDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "endpoint stage", p.StageID, (*easymaker.Client).DeleteStage)
		},
	}))
}
