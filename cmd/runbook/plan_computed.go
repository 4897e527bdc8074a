package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// computed stands, in a plan, for a value known only at run time. The
// plan shows it as written, never as a guess: the same text in params,
// paths and bodies, and in JSON one object instead of a value.
type computed struct {
	// Expr is the expression of a value that is exactly one ${{ }}.
	Expr string `json:"expr,omitempty"`
	// Template is a string with ${{ }} parts, as written.
	Template string `json:"template,omitempty"`
	// DerivedFrom names the params a step computes this value from, when
	// the value is neither of them as written.
	DerivedFrom []string `json:"derived_from,omitempty"`

	src string // Expr as written, ${{ }} and spacing included
}

// text is how people read it: the source as written.
func (c computed) text() string {
	switch {
	case c.src != "":
		return c.src
	case c.Expr != "":
		return "${{ " + c.Expr + " }}"
	case c.Template != "":
		return c.Template
	}
	return "<computed at run time from " + strings.Join(c.DerivedFrom, ", ") + ">"
}

// sourceValue is the value of a YAML node for the plan: literals and
// expressions whose inputs are known now are evaluated; every expression
// that depends on the run (a step's outputs, item, trigger, an input not
// given) is a computed placeholder holding its source.
func sourceValue(n *yaml.Node, sc *expr.Scope, missing map[string]bool) any {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = sourceValue(n.Content[i+1], sc, missing)
		}
		return out
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = sourceValue(c, sc, missing)
		}
		return out
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${{") {
			var v any
			if n.Decode(&v) != nil {
				return n.Value
			}
			return v
		}
		ph := placeholderOf(n.Value)
		v, err := expr.CompileTemplate(n.Value, nil)
		if err != nil || unknownRefs(v.Refs(), missing) != "" {
			return ph
		}
		x, err := v.Eval(sc)
		if err != nil {
			return ph
		}
		return x
	}
	return nil
}

// placeholderOf is the placeholder of a string with ${{ }} parts.
func placeholderOf(s string) computed {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "${{") && strings.HasSuffix(t, "}}") && strings.Count(t, "${{") == 1 {
		return computed{Expr: strings.TrimSpace(t[3 : len(t)-2]), src: t}
	}
	return computed{Template: s}
}

// textOf renders a value on one line for people: computed parts as their
// source, the rest as compact JSON (strings as they are).
func textOf(v any) string {
	switch x := v.(type) {
	case computed:
		return x.text()
	case string:
		return x
	}
	return textJSON(v, "", "")
}

// textJSON encodes v as JSON where each computed part reads as its source:
// a whole expression bare (its type is known only at run time), a
// template as a JSON string.
func textJSON(v any, prefix, indent string) string {
	var marks []computed
	var mark func(v any) any
	mark = func(v any) any {
		switch x := v.(type) {
		case computed:
			marks = append(marks, x)
			return fmt.Sprintf("\x1fcomputed%d\x1f", len(marks)-1)
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = mark(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = mark(e)
			}
			return out
		}
		return v
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	if err := enc.Encode(mark(v)); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	for i, c := range marks {
		repl := c.text()
		if c.Template != "" {
			q, _ := json.Marshal(c.Template)
			repl = strings.ReplaceAll(string(q), `\u003c`, "<")
		}
		s = strings.Replace(s, fmt.Sprintf(`"\u001fcomputed%d\u001f"`, i), repl, 1)
	}
	return s
}

// tracer follows the params a plan knows only at run time through a Plan
// hook: each gets a distinct stand-in (a string, a number or a boolean,
// whatever its field takes), the hook runs twice with two sets of
// stand-ins, and what differs between the two runs is what depends on
// them. A stand-in found as is becomes the param's placeholder; anything
// else that differs is marked as derived from the params.
type tracer struct {
	names []string // unknown params, sorted
	shown map[string]any
	strA  map[string]string
	strB  map[string]string
	numA  map[string]float64
	listA map[string]string // one-element list stand-ins
}

func partialCalls(st *playbook.Step, known map[string]any, shown []planParam) (calls []steps.PlannedCall, note string) {
	if st.Desc.Plan == nil {
		return nil, ""
	}
	tr := &tracer{shown: map[string]any{}, strA: map[string]string{}, strB: map[string]string{}, numA: map[string]float64{}, listA: map[string]string{}}
	lit := make(map[string]any, len(shown))
	for k, v := range known {
		lit[k] = v
	}
	for _, pp := range shown {
		if !pp.Known {
			lit[pp.Name] = steps.Dynamic{}
			tr.names = append(tr.names, pp.Name)
			tr.shown[pp.Name] = pp.Value
		}
	}
	sort.Strings(tr.names)
	pa, _ := st.Desc.DecodeLiteral(lit)
	pb, _ := st.Desc.DecodeLiteral(lit)
	if pa == nil || pb == nil {
		return nil, ""
	}
	for i, name := range tr.names {
		sa, sb := fmt.Sprintf("rbplanA%dz", i), fmt.Sprintf("rbplanB%dz", i)
		na, nb := float64(7001+2*i), float64(7002+2*i)
		switch {
		case st.Desc.SetScalar(pa, name, sa) && st.Desc.SetScalar(pb, name, sb):
			tr.strA[name], tr.strB[name] = sa, sb
		case st.Desc.SetScalar(pa, name, na) && st.Desc.SetScalar(pb, name, nb):
			tr.numA[name] = na
		case st.Desc.SetScalar(pa, name, []string{sa}) && st.Desc.SetScalar(pb, name, []string{sb}):
			tr.listA[name] = sa
		default:
			st.Desc.SetScalar(pa, name, false)
			st.Desc.SetScalar(pb, name, true)
		}
	}
	ca, cb := runPlan(st.Desc.Plan, pa), runPlan(st.Desc.Plan, pb)
	if ca == nil {
		return nil, ""
	}
	note = "values computed at run time are shown as written, ${{ }} and all"
	if len(ca) != len(cb) {
		note = "which calls are made depends on values computed at run time; " + note
		cb = ca
	}
	out := make([]steps.PlannedCall, len(ca))
	for i := range ca {
		a, b := ca[i], cb[i]
		out[i] = steps.PlannedCall{Method: a.Method, Path: tr.text(a.Path, b.Path), Note: tr.text(a.Note, b.Note)}
		if a.Body != nil {
			body := tr.merge(generic(a.Body), generic(b.Body))
			if m, ok := body.(map[string]any); ok {
				// A param the hook could not carry (a list, a map) that
				// reaches the body under its own name as a zero value.
				for _, name := range tr.names {
					if v, ok := m[name]; ok && isZero(v) {
						m[name] = tr.shown[name]
					}
				}
			}
			out[i].Body = body
		}
	}
	return out, note
}

func runPlan(plan steps.PlanFunc, params any) (calls []steps.PlannedCall) {
	defer func() {
		if recover() != nil {
			calls = nil // a plan that needs every param: nothing to show
		}
	}()
	return plan(params)
}

// text replaces the string stand-ins of a path or note by the params'
// source; a text that still differs between the two runs is derived.
func (tr *tracer) text(a, b string) string {
	ra, rb := a, b
	for _, name := range tr.names {
		if s, ok := tr.strA[name]; ok {
			ra = strings.ReplaceAll(ra, s, textOf(tr.shown[name]))
			rb = strings.ReplaceAll(rb, tr.strB[name], textOf(tr.shown[name]))
		}
	}
	if ra != rb {
		return computed{DerivedFrom: tr.withNames()}.text()
	}
	return ra
}

func (tr *tracer) withNames() []string {
	out := make([]string, len(tr.names))
	for i, n := range tr.names {
		out[i] = "with." + n
	}
	return out
}

// merge returns a with every part that differs from b replaced: a
// stand-in by its param's placeholder, anything else by a derived mark.
func (tr *tracer) merge(a, b any) any {
	derived := computed{DerivedFrom: tr.withNames()}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return derived
		}
		out := make(map[string]any, len(x))
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				out[k] = derived
				continue
			}
			out[k] = tr.merge(v, w)
		}
		return out
	case []any:
		if len(x) == 1 {
			for _, name := range tr.names {
				if s, ok := tr.listA[name]; ok && x[0] == s {
					return tr.shown[name]
				}
			}
		}
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return derived
		}
		out := make([]any, len(x))
		for i := range x {
			out[i] = tr.merge(x[i], y[i])
		}
		return out
	case string:
		for _, name := range tr.names {
			if tr.strA[name] == x && x != "" {
				return tr.shown[name]
			}
		}
		y, ok := b.(string)
		if ok && x == y {
			return x
		}
		if ok {
			ra, rb := x, y
			for _, name := range tr.names {
				if s, ok := tr.strA[name]; ok {
					ra = strings.ReplaceAll(ra, s, textOf(tr.shown[name]))
					rb = strings.ReplaceAll(rb, tr.strB[name], textOf(tr.shown[name]))
				}
			}
			if ra == rb {
				return computed{Template: ra}
			}
		}
		return derived
	case float64:
		for _, name := range tr.names {
			if n, ok := tr.numA[name]; ok && n == x {
				return tr.shown[name]
			}
		}
		if y, ok := b.(float64); ok && y == x {
			return x
		}
		return derived
	}
	if fmt.Sprint(a) == fmt.Sprint(b) {
		return a
	}
	return derived
}

// generic turns a planned body into plain JSON values.
func generic(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case float64:
		return x == 0
	case bool:
		return !x
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
