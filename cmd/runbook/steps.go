package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/steps"

	"github.com/runbook/runbook/internal/suggest"
)

var stepsVerb = &verb{
	name:    "steps",
	summary: "list step types, or show the params and outputs of one",
	run:     cmdSteps,
	instant: true,
}

func cmdSteps(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "steps",
		usage:   "[TYPE] [--output json] | --markdown DIR",
		summary: "List every step type with its summary, or describe one: params (type, required, default, constraints) and outputs.",
		details: "--markdown DIR writes one page per step family (with an example of every type) into DIR, as docs/steps is made by `make docs`.",
	})
	out := addOutputFlag(fs, "text")
	markdown := fs.String("markdown", "", "write the reference pages of every step type into `DIR`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *markdown != "" {
		if err := wantArgs(fs, pos, 0, 0, ""); err != nil {
			return err
		}
		if err := writeStepDocsDir(*markdown); err != nil {
			return withHint(fmt.Errorf("write the step pages: %w", err), "")
		}
		return nil
	}
	if err := wantArgs(fs, pos, 0, 1, ""); err != nil {
		return err
	}
	if len(pos) == 0 {
		return a.listSteps(out.json)
	}
	d, err := lookupStep(pos[0])
	if err != nil {
		return err
	}
	return a.describeStep(d, out.json)
}

// lookupStep finds a step type, suggesting a close name when unknown.
func lookupStep(name string) (*steps.Descriptor, error) {
	if d, ok := steps.Lookup(name); ok {
		return d, nil
	}
	msg := fmt.Sprintf("unknown step type %q", name)
	if s := suggest.Closest(name, steps.Names()); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return nil, &exitError{code: 2, err: fmt.Errorf("%s", msg), hint: "runbook steps"}
}

type stepSummary struct {
	Type     string `json:"type"`
	Summary  string `json:"summary"`
	Mutating bool   `json:"mutating"`
}

func (a *app) listSteps(asJSON bool) error {
	all := steps.All()
	if asJSON {
		list := make([]stepSummary, len(all))
		for i, d := range all {
			list[i] = stepSummary{Type: d.Type, Summary: d.Summary, Mutating: d.Mutating}
		}
		return writeJSON(a.stdout, list)
	}
	tw := newTable(a.stdout, 3)
	tw.row("TYPE", "SUMMARY")
	for _, d := range all {
		tw.row(d.Type, d.Summary)
	}
	return tw.flush()
}

// paramInfo is one row of a step's params, read from its JSON Schema.
type paramInfo struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Required    bool     `json:"required"`
	Default     any      `json:"default,omitempty"`
	Constraints []string `json:"constraints,omitempty"`
	Description string   `json:"description,omitempty"`
}

type stepDescription struct {
	Type         string         `json:"type"`
	Summary      string         `json:"summary"`
	Mutating     bool           `json:"mutating"`
	Idempotent   bool           `json:"idempotent,omitempty"`
	OpenParams   bool           `json:"open_params,omitempty"`
	Params       []paramInfo    `json:"params"`
	ParamsSchema map[string]any `json:"params_schema"`
	Outputs      []steps.Output `json:"outputs"`
	OpenOutputs  bool           `json:"open_outputs,omitempty"`
}

func (a *app) describeStep(d *steps.Descriptor, asJSON bool) error {
	schema := d.ParamsSchema()
	desc := stepDescription{
		Type: d.Type, Summary: d.Summary, Mutating: d.Mutating, Idempotent: d.Idempotent, OpenParams: d.OpenParams,
		Params: paramRows("", schema), ParamsSchema: schema, Outputs: d.Outputs,
		OpenOutputs: d.OpenOutputs || d.OutputsFromWith,
	}
	if desc.Outputs == nil {
		desc.Outputs = []steps.Output{}
	}
	if asJSON {
		return writeJSON(a.stdout, desc)
	}
	w := a.stdout
	fmt.Fprintf(w, "%s — %s\n", d.Type, d.Summary)
	if d.Mutating {
		fmt.Fprintln(w, "Mutating: yes (an intent is recorded before each call; a resumed run reconciles instead of repeating it)")
	}
	if d.Idempotent {
		fmt.Fprintf(w, "Idempotent: yes (running it again changes nothing; on record with its end unless it runs for %s)\n", engine.ShownAfter)
	}
	fmt.Fprintln(w)
	switch {
	case len(desc.Params) > 0:
		fmt.Fprintln(w, "Params (with:):")
		tw := newTable(w, 2)
		tw.row("  NAME", "TYPE", "REQUIRED", "DEFAULT", "CONSTRAINTS", "DESCRIPTION")
		for _, p := range desc.Params {
			req := ""
			if p.Required {
				req = "yes"
			}
			def := ""
			if p.Default != nil {
				def = compactJSON(p.Default)
			}
			tw.row("  "+p.Name, p.Type, req, def, strings.Join(p.Constraints, ", "), p.Description)
		}
		if err := tw.flush(); err != nil {
			return err
		}
		if d.OpenParams {
			fmt.Fprintln(w, "  (other keys are accepted and passed to the step)")
		}
	case d.OutputsFromWith || d.OpenParams:
		fmt.Fprintln(w, "Params (with:): any keys")
	default:
		fmt.Fprintln(w, "Params: none")
	}
	fmt.Fprintln(w)
	switch {
	case d.OutputsFromWith:
		fmt.Fprintln(w, "Outputs: one per key of with:")
	case len(d.Outputs) == 0 && !d.OpenOutputs:
		fmt.Fprintln(w, "Outputs: none")
	default:
		fmt.Fprintln(w, "Outputs:")
		tw := newTable(w, 2)
		for _, o := range d.Outputs {
			tw.row("  "+o.Name, o.Type, o.Description)
		}
		if err := tw.flush(); err != nil {
			return err
		}
		if d.OpenOutputs {
			fmt.Fprintln(w, "  (more outputs are known only at run time)")
		}
	}
	return nil
}

// paramRows flattens a params schema into rows; nested objects are listed
// with dotted names.
func paramRows(prefix string, schema map[string]any) []paramInfo {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if rs, ok := schema["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	var rows []paramInfo
	for _, name := range names {
		ps, _ := props[name].(map[string]any)
		real := realSchema(ps)
		row := paramInfo{
			Name:        prefix + name,
			Type:        schemaType(real),
			Required:    required[name],
			Default:     ps["default"],
			Constraints: constraints(real),
		}
		row.Description, _ = ps["description"].(string)
		rows = append(rows, row)
		if _, nested := real["properties"]; nested {
			rows = append(rows, paramRows(prefix+name+".", real)...)
		}
		// maps and lists of objects: fields.*.type, items[].name
		if ap, ok := real["additionalProperties"].(map[string]any); ok {
			if elem := realSchema(ap); elem["properties"] != nil {
				rows = append(rows, paramRows(prefix+name+".*.", elem)...)
			}
		}
		if it, ok := real["items"].(map[string]any); ok {
			if elem := realSchema(it); elem["properties"] != nil {
				rows = append(rows, paramRows(prefix+name+"[].", elem)...)
			}
		}
	}
	return rows
}

// realSchema strips the "or an expression" alternative of a param schema.
func realSchema(s map[string]any) map[string]any {
	if alts, ok := s["anyOf"].([]any); ok && len(alts) > 0 {
		if r, ok := alts[0].(map[string]any); ok {
			return r
		}
	}
	return s
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		switch t {
		case "array":
			if items, ok := s["items"].(map[string]any); ok {
				if it := schemaType(realSchema(items)); it != "any" {
					return "list of " + it
				}
			}
			return "list"
		case "object":
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				if it := schemaType(realSchema(ap)); it != "any" {
					return "map of " + it
				}
				return "map"
			}
			if _, ok := s["properties"]; ok {
				return "object"
			}
			return "map"
		}
		return t
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			parts[i] = fmt.Sprint(x)
		}
		if strings.Join(parts, ",") == "string,integer" {
			return "duration"
		}
		return strings.Join(parts, " or ")
	}
	return "any"
}

func constraints(s map[string]any) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	isDuration := schemaType(s) == "duration"
	lo, hasLo := s["minimum"]
	hi, hasHi := s["maximum"]
	show := func(v any) string { return fmt.Sprint(v) }
	if isDuration {
		show = secondsText
		if n, ok := asInt64(lo); ok && n == 0 {
			hasLo = false // durations are never negative
		}
	}
	switch {
	case hasLo && hasHi:
		add("%s..%s", show(lo), show(hi))
	case hasLo:
		add(">= %s", show(lo))
	case hasHi:
		add("<= %s", show(hi))
	}
	for _, k := range [][2]string{{"minLength", "maxLength"}, {"minItems", "maxItems"}, {"minProperties", "maxProperties"}} {
		lo, hasLo := s[k[0]]
		hi, hasHi := s[k[1]]
		what := "length"
		if k[0] != "minLength" {
			what = "count"
		}
		switch {
		case hasLo && hasHi:
			add("%s %v..%v", what, lo, hi)
		case hasLo:
			add("%s >= %v", what, lo)
		case hasHi:
			add("%s <= %v", what, hi)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		parts := make([]string, len(e))
		for i, x := range e {
			parts[i] = fmt.Sprint(x)
		}
		add("one of %s", strings.Join(parts, "|"))
	}
	if f, ok := s["format"].(string); ok {
		add("format %s", f)
	}
	if p, ok := s["pattern"].(string); ok && !isDuration {
		add("pattern %s", p)
	}
	if items, ok := s["items"].(map[string]any); ok {
		for _, c := range constraints(realSchema(items)) {
			add("each %s", c)
		}
	}
	return out
}

func compactJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// secondsText renders a bound in seconds as a duration: 90 -> 1m30s, 86400 -> 24h.
func secondsText(v any) string {
	n, ok := asInt64(v)
	if !ok {
		return fmt.Sprint(v)
	}
	s := (time.Duration(n) * time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
