package steps

import (
	"fmt"
	"sort"

	"github.com/runbook/runbook/internal/suggest"
)

// CheckAnswer checks the fields of an approval's answer against the
// declared ones and applies their defaults. It returns the typed values and
// every problem found: a required field left out, a value of the wrong
// type, an unknown field (with the declared name it probably meant).
// Integers arrive as int from YAML and CLI parsing and as float64 from
// JSON; both are accepted when integral.
func CheckAnswer(decl map[string]Field, got map[string]any) (map[string]any, []string) {
	out := make(map[string]any, len(decl))
	var problems []string
	names := make([]string, 0, len(decl))
	for name := range decl {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := decl[name]
		v, ok := got[name]
		if !ok || v == nil {
			switch {
			case f.Default != nil:
				v = f.Default
			case f.Required:
				problems = append(problems, fmt.Sprintf("field %s is required", name))
				continue
			default:
				out[name] = nil
				continue
			}
		}
		cv, err := ConvertField(f.Type, v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("field %s %s", name, err))
			continue
		}
		out[name] = cv
	}
	var unknown []string
	for name := range got {
		if _, ok := decl[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		problems = append(problems, fmt.Sprintf("unknown field %q%s", name, suggest.Hint(name, names)))
	}
	return out, problems
}

// ConvertField checks v against an approval field type (string, integer,
// number, boolean) and returns it as that type.
func ConvertField(typ string, v any) (any, error) {
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "integer":
		switch n := v.(type) {
		case int:
			return int64(n), nil
		case int64:
			return n, nil
		case float64:
			if n == float64(int64(n)) {
				return int64(n), nil
			}
		}
	case "number":
		switch n := v.(type) {
		case int:
			return float64(n), nil
		case int64:
			return float64(n), nil
		case float64:
			return n, nil
		}
	}
	article := "a"
	if typ == "integer" {
		article = "an"
	}
	return nil, fmt.Errorf("must be %s %s (got %s)", article, typ, describe(v))
}
