package easymaker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/steps"
)

// ---- easymaker.experiment.create --------------------------------------------

type experimentCreateParams struct {
	connParam
	ExperimentName        string `json:"experiment_name" required:"true" maxlen:"50" desc:"experiment name, up to 50 characters; an existing experiment of the name is adopted (its ID returned), as the SDK does"`
	ExperimentDescription string `json:"experiment_description" maxlen:"255" desc:"up to 255 characters"`
	TagList               []Tag  `json:"tag_list" maxlen:"10" desc:"up to 10 tags"`
	waitParams
}

func experimentRequest(p *experimentCreateParams) easymaker.CreateExperimentRequest {
	return easymaker.CreateExperimentRequest{ExperimentName: p.ExperimentName, ExperimentDescription: p.ExperimentDescription, TagList: tags(p.TagList)}
}

func experimentSnapshot(e *easymaker.Experiment) snapshot {
	return snapshot{Status: e.ExperimentStatusCode, Reason: e.StatusReason, Outputs: steps.Outputs{
		"experiment_id": e.ExperimentID, "experiment_name": e.ExperimentName, "status": e.ExperimentStatusCode}}
}

var experiments = resource[easymaker.Experiment]{func(x *easymaker.Experiment) string { return x.ExperimentID }, experimentSnapshot}

func findExperiment(ctx context.Context, cl *easymaker.Client, p *experimentCreateParams) (*adoption, error) {
	return experiments.adopt(cl.FindExperimentByName(ctx, p.ExperimentName))
}

func experimentCreation(c *steps.Call, p *experimentCreateParams) creation {
	return creation{what: "experiment", conn: p.Connection, wait: p.waitParams,
		read: experiments.reader((*easymaker.Client).GetExperiment),
		create: func(ctx context.Context, cl *easymaker.Client) (string, snapshot, error) {
			return experiments.created(cl.CreateExperiment(ctx, experimentRequest(p)))
		}}
}

// ---- easymaker.experiment.delete --------------------------------------------

type experimentDeleteParams struct {
	connParam
	ExperimentID string `json:"experiment_id" required:"true" maxlen:"36" desc:"ID of the experiment to delete"`
}

func init() {
	steps.Register(steps.Define(steps.Def[experimentCreateParams]{
		Type: "easymaker.experiment.create",
		Summary: "Create an experiment (Experiment().create; POST /experiments). An experiment of the same name is adopted " +
			"instead of creating another; with wait, the step ends when it is ACTIVE.",
		Example:  map[string]any{"experiment_name": "mnist", "experiment_description": "digit classifiers"},
		Mutating: true,
		Outputs: []steps.Output{
			{Name: "experiment_id", Type: "string", Description: "the experiment's ID"},
			{Name: "experiment_name", Type: "string", Description: "its name"},
			{Name: "status", Type: "string", Description: "its status (ACTIVE when waited)"},
			adoptedOutput,
		},
		Plan: func(p *experimentCreateParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: apiPath("experiments"), Note: "looks for an experiment named " + p.ExperimentName + " (adopted if it exists)"},
				{Method: http.MethodPost, Path: apiPath("experiments"), Body: experimentRequest(p), Note: waitNote(p.waitParams, 0, "ACTIVE")},
			}
		},
		Reconcile: reconcileBy(experimentCreation, findExperiment),
		Run: func(ctx context.Context, c *steps.Call, p *experimentCreateParams) (steps.Outputs, error) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%s: %w", c.StepID, err)
			}
			k := experimentCreation(c, p)
			if !calledAlready(c) {
				cl, err := clientFor(c, p.Connection)
				if err != nil {
					return nil, err
				}
				a, err := findExperiment(ctx, cl, p)
				if err != nil {
					return nil, err
				}
				if a != nil {
					c.Log.Info("adopting the existing experiment of the name", "experiment", p.ExperimentName, "id", a.id)
					k.adopted = a
				}
			}
			return runCreate(ctx, c, k)
		},
	}))
	steps.Register(steps.Define(steps.Def[experimentDeleteParams]{
		Type:     "easymaker.experiment.delete",
		Summary:  "Delete an experiment (Experiment().delete; DELETE /experiments/{id}). An experiment already gone counts as deleted.",
		Example:  map[string]any{"experiment_id": "exp-1"},
		Mutating: true,
		Outputs:  deleteOutputs,
		Plan: func(p *experimentDeleteParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodDelete, Path: apiPath("experiments", p.ExperimentID)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *experimentDeleteParams) (steps.Outputs, error) {
			return deleteResult(ctx, c, p.Connection, "experiment", p.ExperimentID, (*easymaker.Client).DeleteExperiment)
		},
	}))
}
