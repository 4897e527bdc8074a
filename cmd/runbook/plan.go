package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

var planVerb = &verb{
	name:    "plan",
	summary: "show the steps and API calls a run would make, without running",
	run:     cmdPlan,
}

// secretMask stands for every secret in a plan: real values are never
// looked at, so neither they nor values derived from them can be printed.
const secretMask = "***"

func cmdPlan(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "plan",
		usage:   "FILE [-i key=value ...] [--output json]",
		summary: "Show what a run would do, in order: each step with its resolved params and, for API steps, the calls it would make.",
		details: `Values known only at run time (from earlier steps' outputs, item, the
trigger, an input not given) are shown as written, ${{ }} and all, in
params, paths and bodies alike; in --output json each is an object,
{"expr": "..."} for a value that is one ${{ }}, {"template": "..."} for a
string with ${{ }} parts, never a zero value. Secrets are always ***.`,
	})
	var inputs kvList
	fs.Var(&inputs, "i", "input `key=value` (repeatable)")
	inputsFile := fs.String("inputs", "", "read inputs from a JSON or YAML `file` (-i overrides)")
	out := addOutputFlag(fs, "text")
	configFile := fs.String("config", "", "config `file` whose hosts: inventory ssh steps and hosts() read (default ./runbook.yaml when it exists)")
	var sf stateFlags
	sf.addSecrets(fs)
	pos, err := parsePositional(fs, args, 1, 1, "the playbook FILE")
	if err != nil {
		return err
	}
	src, err := a.loadSecrets(&sf)
	if err != nil {
		return err
	}
	pb, err := a.load(pos[0])
	if err != nil {
		return err
	}
	given, err := readInputs(*inputsFile, &inputs)
	if err != nil {
		return err
	}
	// Register the secrets the playbook uses, so that a value reaching the
	// output some other way (an env var holding it) is masked too.
	var unset []string
	for _, name := range pb.Secrets {
		if v, ok := src.Lookup(name); ok {
			a.redactor.Add(v)
		} else {
			unset = append(unset, name)
		}
	}
	var cfg *config.Config
	if *configFile != "" || !sameFile(config.DefaultFile, pos[0]) {
		if cfg, err = knownConfig(a, *configFile); err != nil {
			return err
		}
	}
	var hosts expr.HostSource
	if cfg != nil {
		hosts = configHosts(cfg.Hosts)
	}
	p, err := makePlan(pb, given, hosts)
	if err != nil {
		return withHint(err, "runbook plan "+pos[0]+" -i NAME=VALUE")
	}
	if cfg != nil {
		planHosts(p, pb, cfg)
	}
	for _, name := range unset {
		p.Warnings = append(p.Warnings, fmt.Sprintf("secret %s is not set: a run would stop before its first step", name))
	}
	if out.json {
		var buf strings.Builder
		if err := writeJSON(&buf, p); err != nil {
			return err
		}
		io.WriteString(a.stdout, a.redactor.String(buf.String()))
	} else {
		var buf strings.Builder
		p.print(&buf)
		io.WriteString(a.stdout, a.redactor.String(buf.String()))
	}
	if p.invalid {
		return &exitError{code: 2, err: fmt.Errorf("the run would fail: invalid params"), hint: "runbook steps TYPE shows the params of a step type"}
	}
	return nil
}

// plan is what `runbook plan` shows (and its JSON document).
type plan struct {
	Playbook string         `json:"playbook"`
	File     string         `json:"file,omitempty"`
	Inputs   map[string]any `json:"inputs"`
	Missing  []string       `json:"missing_inputs,omitempty"`
	Warnings []string       `json:"warnings,omitempty"`
	Lists    []planList     `json:"lists"`

	invalid bool
	keys    []string // input names in declaration order
}

type planList struct {
	Name  string     `json:"name"` // steps, on_failure, finally
	Steps []planStep `json:"steps"`
}

type planStep struct {
	ID       string              `json:"id"`
	Uses     string              `json:"uses"`
	Needs    []string            `json:"needs,omitempty"`
	If       string              `json:"if,omitempty"`
	ForEach  any                 `json:"for_each,omitempty"`
	Timeout  string              `json:"timeout,omitempty"`
	Retry    int                 `json:"retry_attempts,omitempty"`
	With     []planParam         `json:"with"`
	Calls    []steps.PlannedCall `json:"calls,omitempty"`
	Problems []string            `json:"problems,omitempty"`
	Note     string              `json:"note,omitempty"`
}

type planParam struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
	// Known is false when the value is only known at run time; Value is
	// then its source: a computed placeholder, or a map or list holding
	// some.
	Known bool `json:"known"`
}

// makePlan resolves what can be known before a run.
func makePlan(pb *playbook.Playbook, given map[string]any, hosts expr.HostSource) (*plan, error) {
	// Required inputs that were not given are reported, not fatal: the
	// values that use them are shown as unknown.
	relaxed := *pb
	relaxed.Inputs = make([]*playbook.Input, len(pb.Inputs))
	var missing []string
	for i, in := range pb.Inputs {
		cp := *in
		if _, ok := given[in.Name]; !ok && in.Required && !in.HasDefault {
			missing = append(missing, in.Name)
		}
		cp.Required = false
		relaxed.Inputs[i] = &cp
	}
	inputs, err := engine.ResolveInputs(&relaxed, given)
	if err != nil {
		return nil, err
	}
	p := &plan{Playbook: pb.Name, File: pb.Path, Inputs: inputs, Missing: missing}
	for _, m := range missing {
		p.Warnings = append(p.Warnings, fmt.Sprintf("input %s is required: a run needs -i %s=VALUE", m, m))
	}
	for _, in := range pb.Inputs {
		p.keys = append(p.keys, in.Name)
		if in.Secret {
			if _, ok := inputs[in.Name].(string); ok {
				inputs[in.Name] = secretMask
			}
		}
	}
	missingSet := map[string]bool{}
	for _, m := range missing {
		missingSet[m] = true
		delete(inputs, m)
	}
	sc := &expr.Scope{
		Inputs:  inputs,
		Steps:   map[string]*expr.StepState{},
		Env:     map[string]string{},
		Secrets: map[string]string{},
		Run:     expr.RunInfo{ID: "<run id>", Playbook: pb.Name, StartedAt: time.Now(), Status: "running"},
		Hosts:   hosts,
	}
	for _, name := range pb.Secrets {
		sc.Secrets[name] = secretMask
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			sc.Env[k] = v
		}
	}
	envKeys := make([]string, 0, len(pb.Env))
	for k := range pb.Env {
		envKeys = append(envKeys, k)
	}
	sort.Strings(envKeys)
	for _, k := range envKeys {
		v := pb.Env[k]
		if unknownRefs(v.Refs(), missingSet) != "" {
			// Values that use it are known only at run time too.
			missingSet["env."+k] = true
			continue
		}
		if x, err := v.Eval(sc); err == nil {
			sc.Env[k] = stringValue(x)
		}
	}
	for _, l := range []struct {
		name string
		list []*playbook.Step
	}{{"steps", pb.Steps}, {"on_failure", pb.OnFailure}, {"finally", pb.Finally}} {
		if len(l.list) == 0 {
			continue
		}
		pl := planList{Name: l.name}
		// Lists after the main one see the run's outcome: the plan shows
		// the happy path for finally, a failure for on_failure.
		switch l.name {
		case "on_failure":
			sc.Run.Status = "failed"
		case "finally":
			sc.Run.Status = "succeeded"
		}
		for _, st := range executionOrder(l.list) {
			ps := planStepOf(st, sc, missingSet)
			if len(ps.Problems) > 0 && ps.Note == "" {
				p.invalid = true
			}
			pl.Steps = append(pl.Steps, ps)
		}
		p.Lists = append(p.Lists, pl)
	}
	return p, nil
}

// executionOrder sorts a list so every step comes after its dependencies,
// keeping the written order otherwise (the order the engine starts them).
func executionOrder(list []*playbook.Step) []*playbook.Step {
	index := map[string]int{}
	for i, s := range list {
		index[s.ID] = i
	}
	done := make([]bool, len(list))
	out := make([]*playbook.Step, 0, len(list))
	for len(out) < len(list) {
		progressed := false
		for i, s := range list {
			if done[i] {
				continue
			}
			ready := true
			for _, d := range s.DependsOn {
				if j, ok := index[d]; ok && !done[j] && j != i {
					ready = false
					break
				}
			}
			if ready {
				done[i] = true
				out = append(out, s)
				progressed = true
				break
			}
		}
		if !progressed { // a cycle the loader should have refused
			for i, s := range list {
				if !done[i] {
					done[i] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func planStepOf(st *playbook.Step, sc *expr.Scope, missing map[string]bool) planStep {
	ps := planStep{ID: st.ID, Uses: st.Uses, Needs: st.Needs}
	if st.If != nil {
		ps.If = "${{ " + strings.TrimSpace(st.If.String()) + " }}"
	}
	if st.Timeout > 0 {
		ps.Timeout = st.Timeout.String()
	}
	if st.Retry != nil && st.Retry.Attempts > 1 {
		ps.Retry = st.Retry.Attempts
	}
	if st.ForEach != nil {
		if why := unknownRefs(st.ForEach.Refs(), missing); why != "" {
			ps.ForEach = why
			if n := st.ForEachNode(); n != nil {
				ps.ForEach = sourceValue(n, sc, missing)
			}
		} else if v, err := st.ForEach.Eval(sc); err != nil {
			ps.ForEach = "<error: " + err.Error() + ">"
		} else {
			ps.ForEach = v
		}
	}
	keys := st.WithKeys
	if len(keys) != len(st.With) {
		keys = keys[:0:0]
		for k := range st.With {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	with := make(map[string]any, len(keys))
	allKnown, secret := true, false
	for _, k := range keys {
		v := st.With[k]
		refs := v.Refs()
		for _, r := range refs {
			if r.Kind == "secret" {
				secret = true
			}
		}
		pp := planParam{Name: k}
		if why := unknownRefs(refs, missing); why != "" {
			pp.Value, allKnown = why, false
			if n := st.WithNode(k); n != nil {
				pp.Value = sourceValue(n, sc, missing)
			}
		} else if x, err := v.Eval(sc); err != nil {
			pp.Value, allKnown = "<error: "+err.Error()+">", false
			ps.Problems = append(ps.Problems, fmt.Sprintf("with.%s: %v", k, err))
		} else {
			pp.Value, pp.Known = x, true
			with[k] = x
		}
		ps.With = append(ps.With, pp)
	}
	if ps.With == nil {
		ps.With = []planParam{}
	}
	if st.Desc == nil || st.Desc.OutputsFromWith {
		return ps
	}
	if !allKnown {
		var note string
		ps.Calls, note = partialCalls(st, with, ps.With)
		if len(ps.Calls) > 0 {
			ps.Note = note
		}
		return ps
	}
	params, _, problems := st.Desc.Decode(with)
	if len(problems) > 0 {
		for _, p := range problems {
			ps.Problems = append(ps.Problems, "with."+p.Error())
		}
		if secret {
			ps.Note = "params use secrets, shown here as ***; they are checked again at run time"
		}
		return ps
	}
	if st.Desc.Plan != nil {
		ps.Calls = st.Desc.Plan(params)
	}
	return ps
}

// unknownRefs describes why a value is only known at run time ("" if it
// can be evaluated now).
func unknownRefs(refs []expr.Ref, missing map[string]bool) string {
	var from []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			from = append(from, s)
		}
	}
	for _, r := range refs {
		switch r.Kind {
		case "step":
			if r.Output != "" {
				add("steps." + r.Name + ".outputs." + r.Output)
			} else {
				add("steps." + r.Name)
			}
		case "item":
			add("item")
		case "trigger":
			add("trigger")
		case "input":
			if missing[r.Name] {
				add("inputs." + r.Name + " (not given)")
			}
		case "env":
			if missing["env."+r.Name] {
				add("env." + r.Name)
			}
		}
	}
	if len(from) == 0 {
		return ""
	}
	return "<from " + strings.Join(from, ", ") + ">"
}

func stringValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return textJSON(v, "", "")
}

// print writes the plan for people.
func (p *plan) print(w io.Writer) {
	fmt.Fprintf(w, "Plan for %s", p.Playbook)
	if p.File != "" {
		fmt.Fprintf(w, " (%s)", p.File)
	}
	fmt.Fprintln(w)
	if len(p.keys) > 0 {
		fmt.Fprintln(w, "inputs:")
		for _, k := range p.keys {
			v, ok := p.Inputs[k]
			if !ok {
				fmt.Fprintf(w, "  %s: <not given: required>\n", k)
				continue
			}
			fmt.Fprintf(w, "  %s: %s\n", k, displayValue(v))
		}
	}
	for _, warn := range p.Warnings {
		fmt.Fprintln(w, "warning: "+warn)
	}
	for _, l := range p.Lists {
		fmt.Fprintf(w, "\n%s:\n", l.Name)
		for i, s := range l.Steps {
			fmt.Fprintf(w, "%3d. %s  (%s)\n", i+1, s.ID, s.Uses)
			ind := "       "
			if len(s.Needs) > 0 {
				fmt.Fprintf(w, "%sneeds: %s\n", ind, strings.Join(s.Needs, ", "))
			}
			if s.If != "" {
				fmt.Fprintf(w, "%sif: %s\n", ind, s.If)
			}
			if s.ForEach != nil {
				fmt.Fprintf(w, "%sfor_each: %s\n", ind, displayValue(s.ForEach))
			}
			if s.Timeout != "" {
				fmt.Fprintf(w, "%stimeout: %s\n", ind, s.Timeout)
			}
			if s.Retry > 0 {
				fmt.Fprintf(w, "%sretry: up to %d attempts\n", ind, s.Retry)
			}
			if len(s.With) > 0 {
				fmt.Fprintf(w, "%swith:\n", ind)
				for _, pp := range s.With {
					fmt.Fprintf(w, "%s  %s: %s\n", ind, pp.Name, displayValue(pp.Value))
				}
			}
			for _, c := range s.Calls {
				fmt.Fprintf(w, "%s→ %s %s\n", ind, c.Method, c.Path)
				if c.Body != nil {
					fmt.Fprintf(w, "%s    %s\n", ind, textJSON(c.Body, ind+"    ", "  "))
				}
				if c.Note != "" {
					fmt.Fprintf(w, "%s    (%s)\n", ind, c.Note)
				}
			}
			for _, pr := range s.Problems {
				fmt.Fprintf(w, "%s! %s\n", ind, pr)
			}
			if s.Note != "" {
				fmt.Fprintf(w, "%s  (%s)\n", ind, s.Note)
			}
		}
	}
}

// displayValue renders a value on one line: strings as they are (or
// quoted when empty or multi-line), the rest as JSON.
func displayValue(v any) string {
	if c, ok := v.(computed); ok {
		return c.text()
	}
	if s, ok := v.(string); ok {
		if s == "" || strings.ContainsAny(s, "\n\t") {
			b, _ := json.Marshal(s)
			return string(b)
		}
		return s
	}
	return textJSON(v, "", "")
}
