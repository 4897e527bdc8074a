package easymaker

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/easymaker"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// ---- easymaker.list ---------------------------------------------------------

type listParams struct {
	connParam
	What         string `json:"what" required:"true" enum:"instances,images,algorithms,experiments,trainings,tunings,models,endpoints" desc:"what to list, as the SDK CLI's flags: instances, images, algorithms, experiments, trainings, tunings, models, endpoints"`
	ExperimentID string `json:"experiment_id" maxlen:"36" desc:"trainings and tunings: only those of this experiment"`
}

// listPaths are the collections of each listing.
var listPaths = map[string]string{
	"instances": "flavors", "images": "images", "algorithms": "algorithms", "experiments": "experiments",
	"trainings": "trainings", "tunings": "hyperparameter-tunings", "models": "models", "endpoints": "endpoints",
}

// items turns API objects into JSON-like maps (the API's camelCase keys).
func items[T any](list []T) ([]any, error) {
	b, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	var out []any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// listAll reads one listing and the names in it.
func listAll(ctx context.Context, cl *easymaker.Client, what, experiment string) ([]any, []string, error) {
	var names []string
	collect := func(n string) { names = append(names, n) }
	var out []any
	var err error
	switch what {
	case "instances":
		var l []easymaker.Flavor
		if l, err = cl.ListFlavors(ctx); err == nil {
			for _, x := range l {
				collect(x.FlavorName)
			}
			out, err = items(l)
		}
	case "images":
		var l []easymaker.Image
		if l, err = cl.ListImages(ctx); err == nil {
			for _, x := range l {
				collect(x.ImageName)
			}
			out, err = items(l)
		}
	case "algorithms":
		var l []easymaker.Algorithm
		if l, err = cl.ListAlgorithms(ctx); err == nil {
			for _, x := range l {
				collect(x.AlgorithmName)
			}
			out, err = items(l)
		}
	case "experiments":
		var l []easymaker.Experiment
		if l, err = cl.ListExperiments(ctx); err == nil {
			for _, x := range l {
				collect(x.ExperimentName)
			}
			out, err = items(l)
		}
	case "trainings":
		var l []easymaker.Training
		if l, err = cl.ListTrainings(ctx, experiment); err == nil {
			for _, x := range l {
				collect(x.TrainingName)
			}
			out, err = items(l)
		}
	case "tunings":
		var l []easymaker.HyperparameterTuning
		if l, err = cl.ListTunings(ctx, experiment); err == nil {
			for _, x := range l {
				collect(x.HyperparameterTuningName)
			}
			out, err = items(l)
		}
	case "models":
		var l []easymaker.Model
		if l, err = cl.ListModels(ctx); err == nil {
			for _, x := range l {
				collect(x.ModelName)
			}
			out, err = items(l)
		}
	case "endpoints":
		var l []easymaker.Endpoint
		if l, err = cl.ListEndpoints(ctx); err == nil {
			for _, x := range l {
				collect(x.EndpointName)
			}
			out, err = items(l)
		}
	default:
		return nil, nil, fault.Errorf(fault.Invalid, "what: cannot list %q", what)
	}
	if names == nil {
		names = []string{}
	}
	return out, names, err
}

func init() {
	steps.Register(steps.Define(steps.Def[listParams]{
		Type: "easymaker.list",
		Summary: "List instance types, images, algorithms, experiments, trainings, tunings, models or endpoints " +
			"(the SDK CLI's -instance, -image, -algorithm, -experiment, -training, -tuning, -model, -endpoint).",
		Example: map[string]any{"what": "instances"},
		Outputs: []steps.Output{
			{Name: "items", Type: "list", Description: "the resources as the API gives them (camelCase keys: flavorId, flavorName, ...)"},
			{Name: "names", Type: "list", Description: "their names, in the same order"},
			{Name: "count", Type: "integer", Description: "how many"},
		},
		Plan: func(p *listParams) []steps.PlannedCall {
			path := apiPath(listPaths[p.What])
			if p.ExperimentID != "" && (p.What == "trainings" || p.What == "tunings") {
				path += "?experimentId=" + p.ExperimentID
			}
			return []steps.PlannedCall{{Method: http.MethodGet, Path: path}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *listParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *easymaker.Client) (steps.Outputs, error) {
				list, names, err := listAll(ctx, cl, p.What, p.ExperimentID)
				if err != nil {
					return nil, err
				}
				ns := make([]any, len(names))
				for i, n := range names {
					ns[i] = n
				}
				return steps.Outputs{"items": list, "names": ns, "count": len(list)}, nil
			})
		},
	}))
}
