package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// secretMask stands for every secret the definition of a run shows.
const secretMask = "***"

// playbookDefinition answers GET /api/v1/playbooks/{name}/definition: the
// loaded playbook's source (secret values masked, should one be written
// in it), its inputs with every constraint, and its steps.
func (s *Server) playbookDefinition(w http.ResponseWriter, r *http.Request) {
	pb := s.playbookOr404(w, r.PathValue("name"))
	if pb == nil {
		return
	}
	d := definitionOf(pb)
	d.Source = s.redact(string(pb.Source))
	writeJSON(w, http.StatusOK, d)
}

// runDefinition answers GET /api/v1/runs/{id}/definition: the steps of
// the snapshot the run executes and, for each step that started, its
// params resolved from the run's inputs and the outputs its earlier steps
// recorded, and the API calls those params make.
func (s *Server) runDefinition(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	pb, err := s.runs.Parse(run.File, run.Snapshot)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fault.Internal, fmt.Sprintf("the snapshot of run %s no longer loads: %v", run.ID, err))
		return
	}
	recs, err := s.store.Steps(r.Context(), run.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	d := definitionOf(pb)
	d.File, d.Hash = run.File, run.Hash
	res := newResolver(run, pb, recs)
	for li, l := range stepLists(pb) {
		for si, st := range l.Steps {
			rec := res.recs[st.ID]
			if rec == nil || rec.Status == state.StepSkipped || rec.Status == state.StepPending {
				continue
			}
			spec := &d.Lists[li].Steps[si]
			res.resolve(st, spec)
			for i := range spec.With {
				spec.With[i].Value = s.redactValue(spec.With[i].Value)
			}
			for i := range spec.Calls {
				spec.Calls[i].Path = s.redact(spec.Calls[i].Path)
				spec.Calls[i].Body = s.redactValue(spec.Calls[i].Body)
			}
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// namedSteps is one list of a playbook's steps.
type namedSteps struct {
	Name  string
	Steps []*playbook.Step
}

// stepLists are the playbook's steps, on_failure and finally lists (the
// last two when not empty).
func stepLists(pb *playbook.Playbook) []namedSteps {
	out := []namedSteps{{"steps", pb.Steps}}
	if len(pb.OnFailure) > 0 {
		out = append(out, namedSteps{"on_failure", pb.OnFailure})
	}
	if len(pb.Finally) > 0 {
		out = append(out, namedSteps{"finally", pb.Finally})
	}
	return out
}

// definitionOf is pb's inputs and step lists.
func definitionOf(pb *playbook.Playbook) api.Definition {
	d := api.Definition{Playbook: pb.Name, Description: pb.Description, File: pb.Path, Hash: pb.Hash,
		Inputs: []api.InputSpec{}, Lists: []api.StepList{}}
	for _, in := range pb.Inputs {
		iv := api.InputSpec{Input: api.Input{Name: in.Name, Type: in.Type, Required: in.Required, Enum: in.Enum,
			Description: in.Description, Secret: in.Secret}, Pattern: in.Pattern, Min: in.Min, Max: in.Max}
		if in.HasDefault && !in.Secret {
			iv.Default = in.Default
		}
		d.Inputs = append(d.Inputs, iv)
	}
	for _, l := range stepLists(pb) {
		sl := api.StepList{Name: l.Name, Steps: make([]api.StepSpec, 0, len(l.Steps))}
		for _, st := range l.Steps {
			sl.Steps = append(sl.Steps, stepSpec(st))
		}
		d.Lists = append(d.Lists, sl)
	}
	return d
}

func stepSpec(st *playbook.Step) api.StepSpec {
	sp := api.StepSpec{ID: st.ID, Uses: st.Uses, Name: st.Name, Needs: st.Needs, ForEach: st.ForEach != nil,
		ContinueOnError: st.ContinueOnError}
	if st.If != nil {
		sp.If = "${{ " + strings.TrimSpace(st.If.String()) + " }}"
	}
	if st.Retry != nil && st.Retry.Attempts > 1 {
		sp.RetryAttempts = st.Retry.Attempts
	}
	if st.Timeout > 0 {
		sp.Timeout = st.Timeout.String()
	}
	if st.Desc != nil {
		sp.Mutating = st.Desc.Mutating
	}
	return sp
}

// resolver evaluates the `with` of a run's steps after the fact.
type resolver struct {
	scope *expr.Scope
	recs  map[string]*state.StepRecord
}

func newResolver(run *state.Run, pb *playbook.Playbook, recs []*state.StepRecord) *resolver {
	res := &resolver{recs: make(map[string]*state.StepRecord, len(recs))}
	sc := &expr.Scope{Inputs: run.Inputs, Steps: map[string]*expr.StepState{}, Env: map[string]string{},
		Secrets: map[string]string{}, Trigger: run.Trigger,
		Run: expr.RunInfo{ID: run.ID, Playbook: run.Playbook, StartedAt: run.StartedAt, Status: "running"}}
	if sc.Inputs == nil {
		sc.Inputs = map[string]any{}
	}
	for _, name := range pb.Secrets {
		sc.Secrets[name] = secretMask
	}
	for _, rec := range recs {
		res.recs[rec.ID] = rec
		ss := &expr.StepState{Outputs: rec.Outputs, Status: string(rec.Status)}
		if rec.Error != nil {
			ss.Error = &expr.ErrorInfo{Code: rec.Error.Code, Message: rec.Error.Message, Data: rec.Error.Data, Attempt: rec.Attempts}
		}
		sc.Steps[rec.ID] = ss
	}
	if !run.StartedAt.IsZero() {
		at := run.StartedAt
		sc.Now = func() time.Time { return at }
	}
	res.scope = sc
	return res
}

// unknown describes why a value is known only while its step runs, or "".
func (res *resolver) unknown(refs []expr.Ref) string {
	var from []string
	for _, ref := range refs {
		switch ref.Kind {
		case "item":
			from = append(from, "item")
		case "env":
			from = append(from, "env."+ref.Name)
		case "step":
			if res.recs[ref.Name] == nil {
				from = append(from, "steps."+ref.Name)
			}
		}
	}
	if len(from) == 0 {
		return ""
	}
	return "<from " + strings.Join(from, ", ") + ">"
}

// resolve fills the step's With and, when every param is known, its Calls.
func (res *resolver) resolve(st *playbook.Step, spec *api.StepSpec) {
	with := make(map[string]any, len(st.With))
	known := true
	for _, k := range st.WithKeys {
		v, ok := st.With[k]
		if !ok {
			continue
		}
		p := api.Param{Name: k}
		if why := res.unknown(v.Refs()); why != "" {
			p.Value, known = why, false
		} else if x, err := v.Eval(res.scope); err != nil {
			p.Value, known = "<error: "+err.Error()+">", false
		} else {
			p.Value, p.Known = x, true
			with[k] = x
		}
		spec.With = append(spec.With, p)
	}
	if st.Desc == nil || st.Desc.Plan == nil || st.Desc.OutputsFromWith {
		return
	}
	if st.ForEach != nil {
		spec.Notes = append(spec.Notes, "each item makes its own calls, with its own params")
	}
	if !known {
		return
	}
	params, _, problems := st.Desc.Decode(with)
	if len(problems) > 0 {
		for _, p := range problems {
			spec.Notes = append(spec.Notes, "with."+p.Error())
		}
		return
	}
	for _, c := range st.Desc.Plan(params) {
		spec.Calls = append(spec.Calls, api.Call{Method: c.Method, Path: c.Path, Body: c.Body, Note: c.Note})
	}
}

// redact masks the secrets the server knows of in s.
func (s *Server) redact(str string) string {
	if s.o.Engine.Redactor == nil {
		return str
	}
	return s.o.Engine.Redactor.String(str)
}

func (s *Server) redactValue(v any) any {
	if s.o.Engine.Redactor == nil || v == nil {
		return v
	}
	return s.o.Engine.Redactor.Value(v)
}
