package steps

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/fault"
)

// None is the params type of a step that takes no `with` keys.
type None struct{}

// Def is the typed definition of a step type: the same fields as
// Descriptor, with every hook receiving the decoded params as *P.
// Define turns it into the Descriptor that Register takes.
type Def[P any] struct {
	Type    string
	Summary string
	// Example is a valid `with` map as a user writes it. Every step type
	// has one: the shared contract suite (stepstest, run over every
	// registered type) decodes it, checks it against the schema and runs
	// the step with it, and the step reference (docs/steps) shows it as a
	// one-step playbook that loads. A step without params gives an empty map.
	Example         map[string]any
	Outputs         []Output
	OpenOutputs     bool
	SecretOutputs   []string
	OutputsFromWith bool
	OpenParams      bool
	Mutating        bool
	Pure            bool
	Idempotent      bool
	Scripts         []Script

	Run       func(ctx context.Context, c *Call, p *P) (Outputs, error)
	Reconcile func(ctx context.Context, c *Call, p *P, in Intent) (out Outputs, found bool, err error)
	Check     func(p *P, dynamic map[string]bool) []fault.Problem
	Plan      func(p *P) []PlannedCall
	Preflight func(ctx context.Context, host Host, p *P, dynamic map[string]bool) []fault.Problem
}

// Define returns the Descriptor of d: Params is the zero P (nil for None)
// and each hook is adapted to the untyped signature the engine calls.
func Define[P any](d Def[P]) Descriptor {
	out := Descriptor{
		Type: d.Type, Summary: d.Summary, Example: d.Example, Outputs: d.Outputs,
		OpenOutputs: d.OpenOutputs, SecretOutputs: d.SecretOutputs, OutputsFromWith: d.OutputsFromWith,
		OpenParams: d.OpenParams, Mutating: d.Mutating, Pure: d.Pure, Idempotent: d.Idempotent,
		Scripts: d.Scripts,
	}
	if _, none := any(*new(P)).(None); !none {
		out.Params = *new(P)
	}
	// The adapters below live in this package: the package is read from
	// the family's own params type or Run.
	out.Package = definingPackage(out.Params, d.Run)
	if d.Run != nil {
		out.Run = Typed(d.Run)
	}
	if f := d.Reconcile; f != nil {
		out.Reconcile = func(ctx context.Context, c *Call, in Intent) (Outputs, bool, error) {
			p, err := paramsOf[P](c.StepID, c.Params)
			if err != nil {
				return nil, false, err
			}
			return f(ctx, c, p, in)
		}
	}
	if f := d.Check; f != nil {
		out.Check = func(params any, dynamic map[string]bool) []fault.Problem {
			return f(typedOrZero[P](params), dynamic)
		}
	}
	if f := d.Plan; f != nil {
		out.Plan = func(params any) []PlannedCall { return f(typedOrZero[P](params)) }
	}
	if f := d.Preflight; f != nil {
		out.Preflight = func(ctx context.Context, host Host, params any, dynamic map[string]bool) []fault.Problem {
			return f(ctx, host, typedOrZero[P](params), dynamic)
		}
	}
	return out
}

// Typed adapts a function over a typed params pointer to a RunFunc.
func Typed[P any](f func(ctx context.Context, c *Call, p *P) (Outputs, error)) RunFunc {
	return func(ctx context.Context, c *Call) (Outputs, error) {
		p, err := paramsOf[P](c.StepID, c.Params)
		if err != nil {
			return nil, err
		}
		return f(ctx, c, p)
	}
}

// paramsOf asserts the decoded params of a call. A step without params
// (None) gets a pointer to an empty value.
func paramsOf[P any](step string, params any) (*P, error) {
	if p, ok := params.(*P); ok {
		return p, nil
	}
	if _, none := any(*new(P)).(None); none && params == nil {
		return new(P), nil
	}
	return nil, fmt.Errorf("step %s: params are %T, want *%T", step, params, *new(P))
}

// typedOrZero is params as *P, or a pointer to the zero P when the load
// checks had nothing to decode (load-time hooks never fail on a type).
func typedOrZero[P any](params any) *P {
	if p, ok := params.(*P); ok && p != nil {
		return p
	}
	return new(P)
}
