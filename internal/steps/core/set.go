package core

import (
	"context"

	"github.com/runbook/runbook/internal/steps"
)

func init() {
	steps.Register(steps.Descriptor{
		Type:            "set",
		Summary:         "Name values for later steps: every key of `with` becomes an output.",
		OpenParams:      true,
		Pure:            true,
		OutputsFromWith: true,
		Run:             runSet,
	})
}

func runSet(ctx context.Context, c *steps.Call) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(steps.Outputs, len(c.Extra))
	for k, v := range c.Extra {
		out[k] = v
	}
	return out, nil
}
