package core

import (
	"context"

	"github.com/runbook/runbook/internal/steps"
)

func init() {
	steps.Register(steps.Define(steps.Def[steps.None]{
		Type:            "set",
		Summary:         "Name values for later steps: every key of `with` becomes an output.",
		Example:         map[string]any{"cluster": "prod-1", "replicas": 3},
		OpenParams:      true,
		Pure:            true,
		OutputsFromWith: true,
		Run:             runSet,
	}))
}

func runSet(ctx context.Context, c *steps.Call, _ *steps.None) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(steps.Outputs, len(c.Extra))
	for k, v := range c.Extra {
		out[k] = v
	}
	return out, nil
}
