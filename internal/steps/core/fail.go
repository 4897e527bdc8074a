package core

import (
	"context"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type failParams struct {
	Message string         `json:"message" required:"true" desc:"why the run fails"`
	Code    string         `json:"code" enum:"invalid,not_found,conflict,in_progress,unauthorized,throttled,unavailable,timeout,failed,cancelled,internal" default:"failed" desc:"error code (decides retries and the exit code)"`
	Data    map[string]any `json:"data" desc:"details readable as steps.<id>.error.data"`
}

func init() {
	steps.Register(steps.Define(steps.Def[failParams]{
		Type:    "fail",
		Summary: "Fail the step with a message, an error code and optional data.",
		Example: map[string]any{"message": "prod-1 is not ACTIVE", "code": "conflict", "data": map[string]any{"status": "UPDATE_FAILED"}},
		Run:     runFail,
	}))
}

func runFail(ctx context.Context, c *steps.Call, p *failParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, &fault.Error{Code: fault.Code(p.Code), Message: p.Message, Data: p.Data}
}
