package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/jsonvalue"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/suggest"
)

// ResolveInputs checks given inputs against the playbook's declarations and
// returns the complete input map: defaults applied, values converted to the
// declared type. Strings (from `-i k=v` or a query string) are parsed into
// the declared type; JSON-typed values must already match it. Every problem
// is reported, in declaration order, as one Invalid error.
func ResolveInputs(pb *playbook.Playbook, given map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(pb.Inputs))
	var problems []string
	declared := make(map[string]bool, len(pb.Inputs))
	for _, in := range pb.Inputs {
		declared[in.Name] = true
		v, ok := given[in.Name]
		if !ok {
			switch {
			case in.HasDefault:
				out[in.Name] = in.Default
			case in.Required:
				problems = append(problems, fmt.Sprintf("input %q is required", in.Name))
			default:
				out[in.Name] = nil
			}
			continue
		}
		cv, err := convertInput(in, v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("input %q: %v", in.Name, err))
			continue
		}
		out[in.Name] = cv
	}
	var unknown []string
	for k := range given {
		if !declared[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		names := make([]string, 0, len(pb.Inputs))
		for _, in := range pb.Inputs {
			names = append(names, in.Name)
		}
		if len(names) == 0 {
			problems = append(problems, fmt.Sprintf("unknown input %q (the playbook declares no inputs)", k))
		} else {
			problems = append(problems, fmt.Sprintf("unknown input %q (inputs: %s)%s", k, strings.Join(names, ", "), suggest.Hint(k, names)))
		}
	}
	if len(problems) > 0 {
		return nil, &fault.Error{Code: fault.Invalid, Message: strings.Join(problems, "; ")}
	}
	return out, nil
}

// convertInput converts v, given for input in, to the input's declared
// type and checks it against the input's constraints.
func convertInput(in *playbook.Input, v any) (any, error) {
	var out any
	var err error
	switch in.Type {
	case "", "string":
		out, err = stringInput(v)
	case "integer":
		out, err = integerInput(v)
	case "number":
		out, err = numberInput(v)
	case "boolean":
		out, err = booleanInput(v)
	case "list":
		out, err = listInput(v)
	case "map":
		out, err = mapInput(v)
	default:
		return nil, fmt.Errorf("unsupported input type %q", in.Type)
	}
	if err != nil {
		return nil, err
	}
	return out, in.Check(out)
}

func stringInput(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("must be a string (got %s)", jsonvalue.Kind(v))
	}
	return s, nil
}

func integerInput(v any) (any, error) {
	switch x := v.(type) {
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("must be an integer (got %q)", x)
		}
		return int(n), nil
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("must be an integer (got %v)", x)
		}
		return int(x), nil
	}
	return nil, fmt.Errorf("must be an integer (got %s)", jsonvalue.Kind(v))
}

func numberInput(v any) (any, error) {
	switch x := v.(type) {
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("must be a number (got %q)", x)
		}
		return f, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return nil, fmt.Errorf("must be a number (got %s)", jsonvalue.Kind(v))
}

func booleanInput(v any) (any, error) {
	switch x := v.(type) {
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return nil, fmt.Errorf("must be true or false (got %q)", x)
		}
		return b, nil
	case bool:
		return x, nil
	}
	return nil, fmt.Errorf("must be a boolean (got %s)", jsonvalue.Kind(v))
}

// listInput accepts a list, or a string holding one: JSON, or else a,b,c
// (a list of strings, as the command line gives it).
func listInput(v any) (any, error) {
	if s, ok := v.(string); ok {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err != nil {
			parts := strings.Split(s, ",")
			l := make([]any, len(parts))
			for i, p := range parts {
				l[i] = strings.TrimSpace(p)
			}
			parsed = l
		}
		v = parsed
	}
	if _, ok := v.([]any); !ok {
		return nil, fmt.Errorf("must be a list (got %s)", jsonvalue.Kind(v))
	}
	return v, nil
}

// mapInput accepts a map, or a string holding a JSON object.
func mapInput(v any) (any, error) {
	if s, ok := v.(string); ok {
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err != nil {
			return nil, fmt.Errorf("must be a JSON object (got %q)", s)
		}
		v = parsed
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("must be a map (got %s)", jsonvalue.Kind(v))
	}
	return v, nil
}

// maskedSecretInputs names the secret inputs whose value is the mask: the
// state file never keeps a secret input, so a run executed from its record
// (resumed in another process, retried, launched late) lacks them.
func maskedSecretInputs(pb *playbook.Playbook, inputs map[string]any) []string {
	var out []string
	for _, in := range pb.Inputs {
		if v, ok := inputs[in.Name].(string); in.Secret && ok && v == secrets.Mask {
			out = append(out, in.Name)
		}
	}
	return out
}

// holdForSecretInputs cancels run r, unchanged otherwise, rather than run
// it with a secret input's mask for its value: the error says how to
// resume it with the value. Nothing else is written; a cancelled run
// resumes where it stopped.
func (e *Engine) holdForSecretInputs(ctx context.Context, r *state.Run, missing []string) (*state.Run, error) {
	flags := make([]string, len(missing))
	for i, name := range missing {
		flags[i] = "-i " + name + "=VALUE"
	}
	err := &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
		"run %s was started with secret input %s, whose value the state file does not keep; resume it with `runbook run --resume %s %s`",
		r.ID, strings.Join(missing, ", "), r.ID, strings.Join(flags, " "))}
	now := e.o.Clock.Now()
	r.Status, r.EndedAt = state.RunCancelled, now
	r.Error = &state.ErrorRecord{Code: string(err.Code), Message: err.Message}
	ev := state.Event{Time: now, Type: "run." + string(r.Status), Message: "run cancelled: " + err.Message}
	if serr := e.o.Store.SaveRun(ctx, r, ev); serr != nil {
		return r, serr
	}
	e.observe(r.ID, ev)
	return r, err
}
