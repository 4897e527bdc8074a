package engine

import (
	"context"
	"errors"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// Preflight checks the literal params of every step that has a Preflight
// hook against the live services, before a run starts: the limits no
// offline check can know (a version the API does not support). Findings
// are playbook diagnostics at the params' positions; a service that cannot
// be reached is not a finding (the step checks again before its call).
func (e *Engine) Preflight(ctx context.Context, pb *playbook.Playbook) error {
	return e.PreflightInputs(ctx, pb, nil)
}

// PreflightInputs is Preflight for a run given these inputs: a param whose
// expressions read only inputs (a version given with -i) is evaluated
// against them and checked too. Inputs that do not resolve (a missing
// required one, a wrong type), and secret inputs, leave their params
// unchecked: the run reports those itself.
func (e *Engine) PreflightInputs(ctx context.Context, pb *playbook.Playbook, given map[string]any) error {
	var diags playbook.Diagnostics
	h := &preflightHost{e: e, pb: pb}
	sc := preflightScope(pb, given)
	lists := [][]*playbook.Step{pb.Steps, pb.OnFailure, pb.Finally}
	for _, list := range lists {
		for _, st := range list {
			if st.Desc == nil || st.Desc.Preflight == nil {
				continue
			}
			with := make(map[string]any, len(st.With))
			for k, v := range st.With {
				with[k] = steps.Dynamic{}
				if preflightKnown(pb, v, sc) {
					if val, err := v.Eval(sc); err == nil {
						with[k] = val
					}
				}
			}
			params, dynamic := st.Desc.DecodeLiteral(with)
			for _, p := range st.Desc.Preflight(ctx, h, params, dynamic) {
				diags = append(diags, st.ParamDiagnostic(p.Path, e.o.Redactor.String(p.Message)))
			}
		}
	}
	if len(diags) == 0 {
		return nil
	}
	return diags
}

// preflightHost gives Preflight hooks connections and secrets, nothing
// that writes.
type preflightHost struct {
	e  *Engine
	pb *playbook.Playbook
}

var errNotInPreflight = errors.New("not available before the run starts")

func (h *preflightHost) Connection(name string) (map[string]any, error) {
	sc := &expr.Scope{Env: h.e.environ(), Secrets: h.e.secretValues(h.pb)}
	override := map[string]any{}
	for k, v := range h.pb.Connections[name] {
		val, err := evalConnectionValue(v, sc, h.e.o.Redactor)
		if err != nil {
			return nil, err
		}
		override[k] = val
	}
	if h.e.o.Connection == nil {
		return override, nil
	}
	return h.e.o.Connection(name, override)
}

func (h *preflightHost) Secret(name string) (string, bool) { return h.e.lookupSecret(name) }

func (h *preflightHost) Checkpoint(context.Context, []byte) error { return errNotInPreflight }

func (h *preflightHost) Cursor(context.Context, string) ([]byte, error) {
	return nil, errNotInPreflight
}

func (h *preflightHost) SetCursor(context.Context, string, []byte) error { return errNotInPreflight }

func (h *preflightHost) RunPlaybook(context.Context, string, map[string]any) (steps.Outputs, error) {
	return nil, errNotInPreflight
}

func (h *preflightHost) Mask(s string) string { return h.e.o.Redactor.String(s) }

func (h *preflightHost) AwaitApproval(context.Context, steps.ApprovalRequest) (steps.ApprovalResponse, error) {
	return steps.ApprovalResponse{}, errNotInPreflight
}
