package core

import (
	"context"

	"github.com/runbook/runbook/internal/steps"
)

type playbookParams struct {
	Path   string         `json:"path" required:"true" desc:"sub-playbook file, relative to this playbook's directory"`
	Inputs map[string]any `json:"inputs" desc:"inputs of the sub-playbook"`
}

func init() {
	steps.Register(steps.Define(steps.Def[playbookParams]{
		Type:        "playbook",
		Summary:     "Run another playbook as a child run; its outputs become this step's outputs.",
		Example:     map[string]any{"path": "notify.yaml", "inputs": map[string]any{"channel": "#ops", "text": "prod-1 upgraded"}},
		OpenOutputs: true,
		Run:         runPlaybook,
	}))
}

func runPlaybook(ctx context.Context, c *steps.Call, p *playbookParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inputs := p.Inputs
	if inputs == nil {
		inputs = map[string]any{}
	}
	// The host resolves the path against the playbook's directory, runs or
	// resumes the child and passes ErrSuspended through unchanged.
	return c.Host.RunPlaybook(ctx, p.Path, inputs)
}
