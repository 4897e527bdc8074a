package nks

import (
	"context"
	"net/http"
	"slices"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func init() {
	steps.Register(steps.Define(steps.Def[connParam]{
		Type:    "nks.supports",
		Summary: "List the orchestrator versions the service offers and which are supported, and the task types.",
		Example: map[string]any{},
		Outputs: []steps.Output{
			{Name: "versions", Type: "map", Description: "version -> true when supported"},
			{Name: "latest", Type: "string", Description: `the newest supported version ("" when none)`},
			{Name: "supported", Type: "list", Description: "the supported versions, oldest first"},
			{Name: "cluster_events", Type: "map", Description: "cluster task types -> description"},
			{Name: "nodegroup_events", Type: "map", Description: "node group task types -> description"},
		},
		Plan: func(*connParam) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: nks.Path("supports")}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *connParam) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				sup, err := cl.Supports(ctx)
				if err != nil {
					return nil, err
				}
				versions := map[string]any{}
				var ok []nks.Version
				for name, valid := range sup.SupportedK8s {
					versions[name] = valid
					if v, err := nks.ParseVersion(name); err == nil && valid {
						ok = append(ok, v)
					}
				}
				slices.SortFunc(ok, nks.Version.Compare)
				supported := make([]any, len(ok))
				for i, v := range ok {
					supported[i] = v.String()
				}
				return steps.Outputs{"versions": versions, "latest": sup.Latest(), "supported": supported,
					"cluster_events":   stringMap(sup.SupportedEventType.ClusterEvents),
					"nodegroup_events": stringMap(sup.SupportedEventType.NodeGroupEvents)}, nil
			})
		},
	}))
}
