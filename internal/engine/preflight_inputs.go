package engine

import (
	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
)

// preflightScope is the scope a preflight evaluates params in: the
// resolved inputs and nothing else. Inputs that do not resolve give a
// scope without inputs, so only literal params are checked.
func preflightScope(pb *playbook.Playbook, given map[string]any) *expr.Scope {
	if given == nil && len(pb.Inputs) == 0 {
		return &expr.Scope{}
	}
	inputs, err := ResolveInputs(pb, given)
	if err != nil {
		return &expr.Scope{}
	}
	return &expr.Scope{Inputs: inputs}
}

// preflightKnown reports whether v can be evaluated before the run starts:
// it is literal, or every expression in it reads only inputs that the
// scope holds and that are not secret (a secret stays out of the checks
// and their messages).
func preflightKnown(pb *playbook.Playbook, v expr.Value, sc *expr.Scope) bool {
	if v.Literal() {
		return true
	}
	if sc.Inputs == nil {
		return false
	}
	refs := v.Refs()
	if len(refs) == 0 {
		// an expression of functions alone (now()) is not known ahead
		return false
	}
	for _, r := range refs {
		if r.Kind != "input" {
			return false
		}
		if _, ok := sc.Inputs[r.Name]; !ok || secretInput(pb, r.Name) {
			return false
		}
	}
	return true
}

func secretInput(pb *playbook.Playbook, name string) bool {
	for _, in := range pb.Inputs {
		if in.Name == name {
			return in.Secret
		}
	}
	return false
}
