package expr

import (
	"github.com/expr-lang/expr/ast"
)

// EvalDerived evaluates v in s like v.Eval and also returns the strings of
// the result that derive from a secret, for the caller to register for
// masking before it stores, logs or returns the result.
//
// An expression's result derives from a secret when the expression reads
// `secrets` or reads a scope value (an input, env, trigger, item, step
// output or error, result, error) in which s.Secret finds a secret: taint
// goes through every function, operator, slice and closure, since it is
// decided by what the expression reads, not by how it computes. The
// strings returned are then every string leaf and map key of a tainted
// result (a list or map rendered into a template is returned rendered
// too), except strings written as literals in the expression itself
// (`secrets.x != "" ? "yes" : "no"` reveals no characters of the secret,
// and masking "yes" everywhere would only wreck output). Numbers and
// booleans are not returned. Map and List values taint element by
// element, a template part by part.
func EvalDerived(v Value, s *Scope) (any, []string, error) {
	if s == nil {
		s = &Scope{}
	}
	var d []string
	val, err := evalDerived(v, s, &d)
	if err != nil {
		return nil, nil, err
	}
	return val, d, nil
}

func evalDerived(v Value, s *Scope, d *[]string) (any, error) {
	switch v := v.(type) {
	case literal:
		return v.v, nil
	case *whole:
		val, err := v.p.Eval(s)
		if err == nil && v.p.tainted(s) {
			v.p.leaves(val, d)
		}
		return val, err
	case *template:
		return v.eval(s, d)
	case *mapValue:
		out := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			x, err := evalDerived(v.vals[i], s, d)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case *listValue:
		out := make([]any, len(v.vals))
		for i, e := range v.vals {
			x, err := evalDerived(e, s, d)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	default:
		val, err := v.Eval(s)
		if err != nil {
			return nil, err
		}
		for _, r := range v.Refs() {
			if r.Kind == "secret" {
				(&Program{}).leaves(val, d)
				break
			}
		}
		return val, nil
	}
}

// EvalDerived evaluates the program like Eval and also returns the
// strings of its result that derive from a secret (see the function
// EvalDerived).
func (p *Program) EvalDerived(s *Scope) (any, []string, error) {
	return EvalDerived(&whole{p}, s)
}

// tainted reports whether the program reads a secret from s.
func (p *Program) tainted(s *Scope) bool {
	if p.secret {
		return true
	}
	if s.Secret == nil {
		return false
	}
	if p.result && holds(s.Result, s.Secret) {
		return true
	}
	if p.errRef && errorHolds(s.Error, s.Secret) {
		return true
	}
	for _, r := range p.refs {
		if refTainted(r, s) {
			return true
		}
	}
	return false
}

// refTainted reports whether the scope value r reads holds a secret.
func refTainted(r Ref, s *Scope) bool {
	switch r.Kind {
	case "input":
		return namedHolds(s.Inputs, r.Name, s.Secret)
	case "env":
		return envHolds(s.Env, r.Name, s.Secret)
	case "trigger":
		return namedHolds(s.Trigger, r.Name, s.Secret)
	case "item":
		return s.HasItem && holds(s.Item, s.Secret)
	case "step":
		return stepsHold(s.Steps, r, s.Secret)
	}
	return false
}

// namedHolds reports whether m[name] holds a secret, or any of m when name
// is "".
func namedHolds(m map[string]any, name string, secret func(string) bool) bool {
	if name == "" {
		return holds(m, secret)
	}
	return holds(m[name], secret)
}

// envHolds reports whether the variable name holds a secret, or any
// variable when name is "" (values only: variable names are not secret).
func envHolds(env map[string]string, name string, secret func(string) bool) bool {
	if name != "" {
		return secret(env[name])
	}
	for _, e := range env {
		if secret(e) {
			return true
		}
	}
	return false
}

// stepsHold reports whether what r reads of the steps holds a secret: one
// output when r names it, else the outputs and error of the step r names
// (every step when r names none).
func stepsHold(steps map[string]*StepState, r Ref, secret func(string) bool) bool {
	for id, st := range steps {
		if st == nil || r.Name != "" && id != r.Name {
			continue
		}
		if r.Output != "" {
			if holds(st.Outputs[r.Output], secret) {
				return true
			}
			continue
		}
		if holds(st.Outputs, secret) || errorHolds(st.Error, secret) {
			return true
		}
	}
	return false
}

// errorHolds reports whether an error's message or data holds a secret.
func errorHolds(e *ErrorInfo, secret func(string) bool) bool {
	return e != nil && (secret(e.Message) || holds(e.Data, secret))
}

// holds reports whether secret is true of a string leaf or key of v.
func holds(v any, secret func(string) bool) bool {
	switch v := v.(type) {
	case string:
		return secret(v)
	case map[string]any:
		for k, e := range v {
			if secret(k) || holds(e, secret) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holds(e, secret) {
				return true
			}
		}
	case map[string]string:
		for k, e := range v {
			if secret(k) || secret(e) {
				return true
			}
		}
	case []string:
		for _, e := range v {
			if secret(e) {
				return true
			}
		}
	}
	return false
}

// leaves appends the string leaves and keys of v that are not literals of
// the program.
func (p *Program) leaves(v any, d *[]string) {
	switch v := v.(type) {
	case string:
		if v != "" && !p.lits[v] {
			*d = append(*d, v)
		}
	case map[string]any:
		for k, e := range v {
			p.leaves(k, d)
			p.leaves(e, d)
		}
	case []any:
		for _, e := range v {
			p.leaves(e, d)
		}
	}
}

// stringLits collects the string literals of a parsed tree.
type stringLits map[string]bool

func (l stringLits) Visit(n *ast.Node) {
	if s, ok := (*n).(*ast.StringNode); ok {
		l[s.Value] = true
	}
}
