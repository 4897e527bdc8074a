package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
)

// buildEnv sets the run's env: the process environment, overlaid with the
// playbook's env: evaluated in the order of their names.
func (rs *runState) buildEnv() error {
	env := rs.e.environ()
	rs.env = env
	if len(rs.pb.Env) == 0 {
		return nil
	}
	keys := make([]string, 0, len(rs.pb.Env))
	for k := range rs.pb.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sc := rs.scope(nil)
	for _, k := range keys {
		v, err := rs.eval(rs.pb.Env[k], sc)
		if err != nil {
			return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("env.%s: %v", k, err)}
		}
		env[k] = stringify(v)
	}
	return nil
}

// scope returns the expression environment for a step (or item).
func (rs *runState) scope(it *item) *expr.Scope {
	sc := &expr.Scope{
		Inputs:  rs.inputs,
		Steps:   rs.scopeStep,
		Env:     rs.env,
		Secrets: rs.secrets,
		Trigger: rs.trigger,
		Run: expr.RunInfo{
			ID: rs.run.ID, Playbook: rs.pb.Name, StartedAt: rs.run.StartedAt, Status: rs.status,
		},
		Failed:    rs.failed,
		Cancelled: rs.status == "cancelled",
		Now:       rs.e.now,
		Secret:    rs.e.isSecret,
		Hosts:     (*runHosts)(rs),
	}
	if it != nil {
		sc.Item, sc.Index, sc.HasItem = it.value, it.index, true
	}
	return sc
}

// connectionOverride returns the playbook's `connections:` settings for
// name with every ${{ }} evaluated (secrets, env, inputs). The loader
// checked the expressions; they are compiled here because the model keeps
// connections as written.
func (rs *runState) connectionOverride(name string) (map[string]any, error) {
	raw := rs.pb.Connections[name]
	if raw == nil {
		return nil, nil
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	sc := rs.scope(nil)
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		val, err := evalConnectionValue(v, sc, rs.e.o.Redactor)
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("connections.%s.%s: %v", name, k, err)}
		}
		out[k] = val
	}
	return out, nil
}

func evalConnectionValue(v any, sc *expr.Scope, red Redactor) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "${{") {
			return x, nil
		}
		t, err := expr.CompileTemplate(x, nil)
		if err != nil {
			return nil, err
		}
		return evalDerived(red, t, sc)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			val, err := evalConnectionValue(e, sc, red)
			if err != nil {
				return nil, err
			}
			out[k] = val
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			val, err := evalConnectionValue(e, sc, red)
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	}
	return v, nil
}

// eval evaluates v in sc and registers with the Redactor, before the value
// goes anywhere, every string of it derived from a secret (taint: see
// expr.EvalDerived), so upper(), sha256(), slices and the like of a secret
// are masked wherever the value is stored, logged or shown.
func (rs *runState) eval(v expr.Value, sc *expr.Scope) (any, error) {
	return evalDerived(rs.e.o.Redactor, v, sc)
}

func evalDerived(red Redactor, v expr.Value, sc *expr.Scope) (any, error) {
	if sc.Secret == nil {
		sc.Secret = red.Contains
	}
	val, derived, err := expr.EvalDerived(v, sc)
	if len(derived) > 0 {
		red.AddDerived(derived...)
	}
	return val, err
}

// stringify renders a value as a string: strings as is, others as JSON.
func stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// environ returns the process environment (Options.Environ) as a map.
func (e *Engine) environ() map[string]string {
	env := make(map[string]string, len(e.o.Environ))
	for _, kv := range e.o.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// secretValues returns the values of pb's secrets that are set, by name.
func (e *Engine) secretValues(pb *playbook.Playbook) map[string]string {
	out := map[string]string{}
	for _, name := range pb.Secrets {
		if env, ok := pb.AgentSecrets[name]; ok {
			out[name] = agentSecretPlaceholder(env) // resolved by the agent
			continue
		}
		if v, ok := e.lookupSecret(name); ok {
			out[name] = v
		}
	}
	return out
}

// evalInto evaluates every expression of exprs in sc into out, by key. An
// error names the key under field ("outputs.url").
func (rs *runState) evalInto(out map[string]any, field string, exprs map[string]expr.Value, sc *expr.Scope) error {
	for k, v := range exprs {
		val, err := rs.eval(v, sc)
		if err != nil {
			return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("%s.%s: %v", field, k, err)}
		}
		out[k] = val
	}
	return nil
}
