package ui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
)

// playbooksData is the playbook list's.
type playbooksData struct {
	Rows           []playbookRow
	LoadedAt       time.Time
	ReloadProblems []string
	Reloaded       string
}

type playbookRow struct {
	api.Playbook
	// NextFire is the soonest next fire time of its schedules (RFC 3339).
	NextFire string
	LastRun  *api.Run
	// Recent are its newest runs, newest first (its run history).
	Recent []api.Run
}

// playbooksHistory is how many runs of each playbook the playbooks page
// shows in its history column.
const playbooksHistory = 20

func (u *UI) playbooksPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	var list api.PlaybookList
	if err := u.get(ctx, s, "/api/v1/playbooks", &list); err != nil {
		u.fail(w, r, s, err)
		return
	}
	var sched api.ScheduleList
	if err := u.get(ctx, s, "/api/v1/schedules", &sched); err != nil {
		u.fail(w, r, s, err)
		return
	}
	next := map[string]string{}
	for _, sc := range sched.Schedules {
		if len(sc.Next) > 0 && (next[sc.Playbook] == "" || earlier(sc.Next[0], next[sc.Playbook])) {
			next[sc.Playbook] = sc.Next[0]
		}
	}
	recent, err := u.history(ctx, s, playbooksHistory)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	d := &playbooksData{LoadedAt: list.LoadedAt, ReloadProblems: list.ReloadProblems, Reloaded: r.URL.Query().Get("reloaded")}
	for _, pb := range list.Playbooks {
		row := playbookRow{Playbook: pb, NextFire: next[pb.Name], Recent: recent[pb.Name]}
		if len(row.Recent) > 0 {
			row.LastRun = &row.Recent[0]
		}
		d.Rows = append(d.Rows, row)
	}
	u.render(w, r, http.StatusOK, "playbooks", &view{Title: "Playbooks", Nav: "playbooks", session: s, Data: d})
}

// earlier compares two RFC 3339 times.
func earlier(a, b string) bool {
	ta, err1 := time.Parse(time.RFC3339, a)
	tb, err2 := time.Parse(time.RFC3339, b)
	return err1 == nil && err2 == nil && ta.Before(tb)
}

func (u *UI) reload(w http.ResponseWriter, r *http.Request, s *session) {
	if !u.permitted(w, r, s, Reload, "") {
		return
	}
	var ans api.ReloadAnswer
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/reload", nil, &ans)
	if ae, ok := err.(*APIError); ok && ae.Status == http.StatusUnprocessableEntity {
		// The problems are listed on the page: the last reload's.
		http.Redirect(w, r, "/playbooks?reloaded=refused", http.StatusSeeOther)
		return
	}
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/playbooks?reloaded=ok", http.StatusSeeOther)
}

// playbookData is a playbook page's.
type playbookData struct {
	PB       api.Playbook
	Def      api.Definition
	Graph    *graph
	Problems []string
	Runs     []api.Run
	Form     []fieldView
	Errors   []string
	// PauseError is why a pause or resume of its runs was refused.
	PauseError string
	// Schedules are its schedule triggers' states (paused or not), by
	// trigger index; Done says what the last pause or resume of one did.
	Schedules map[int]*api.Schedule
	Done      string
}

func (u *UI) playbookPage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := u.loadPlaybook(r, s, r.PathValue("name"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "playbook", u.playbookView(s, d))
}

func (u *UI) playbookView(s *session, d *playbookData) *view {
	return &view{Title: "Playbook " + d.PB.Name, Nav: "playbooks", session: s, Data: d}
}

func (u *UI) loadPlaybook(r *http.Request, s *session, name string) (*playbookData, error) {
	ctx := r.Context()
	esc := url.PathEscape(name)
	d := &playbookData{}
	if err := u.get(ctx, s, "/api/v1/playbooks/"+esc, &d.PB); err != nil {
		return nil, err
	}
	if err := u.get(ctx, s, "/api/v1/playbooks/"+esc+"/definition", &d.Def); err != nil {
		return nil, err
	}
	var list api.PlaybookList
	if err := u.get(ctx, s, "/api/v1/playbooks", &list); err != nil {
		return nil, err
	}
	for _, p := range list.ReloadProblems {
		if d.Def.File != "" && strings.HasPrefix(p, d.Def.File+":") {
			d.Problems = append(d.Problems, p)
		}
	}
	var runs api.RunList
	if err := u.get(ctx, s, runsPath(api.RunQuery{Playbook: name, Limit: 10}), &runs); err != nil {
		return nil, err
	}
	var sched api.ScheduleList
	if err := u.get(ctx, s, "/api/v1/schedules", &sched); err != nil {
		return nil, err
	}
	d.Schedules = map[int]*api.Schedule{}
	for i := range sched.Schedules {
		if sc := &sched.Schedules[i]; sc.Playbook == name {
			d.Schedules[sc.Trigger] = sc
		}
	}
	d.Done = r.URL.Query().Get("done")
	d.Runs = runs.Runs
	if len(d.Def.Lists) > 0 {
		d.Graph = layoutGraph("steps", d.Def.Lists[0].Steps, func(string) nodeState { return nodeState{} })
	}
	for _, in := range d.Def.Inputs {
		f := fieldView{Name: in.Name, Type: in.Type, Required: in.Required, Secret: in.Secret, Description: in.Description, Hint: fieldHint(in)}
		if f.Type == "" {
			f.Type = "string"
		}
		if in.Default != nil {
			f.Default = scalar(in.Default)
		}
		for _, e := range in.Enum {
			f.Enum = append(f.Enum, scalar(e))
		}
		d.Form = append(d.Form, f)
	}
	return d, nil
}

// startRun starts a run with the form's inputs, sent as strings exactly
// as `runbook run -i name=value` sends them: the API converts and checks
// them the same way. A refusal shows the form again with each problem
// beside its input.
func (u *UI) startRun(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	if !u.permitted(w, r, s, StartRun, name) {
		return
	}
	inputs := map[string]any{}
	entered := map[string]string{}
	for k, vs := range r.PostForm {
		in, ok := strings.CutPrefix(k, "in.")
		if !ok || len(vs) == 0 || vs[0] == "" {
			continue
		}
		inputs[in] = vs[0]
		entered[in] = vs[0]
	}
	var run api.Run
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/playbooks/"+url.PathEscape(name)+"/runs", api.StartRequest{Inputs: inputs}, &run)
	if err == nil {
		http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
		return
	}
	ae, ok := err.(*APIError)
	if !ok || ae.Status >= 500 {
		u.fail(w, r, s, err)
		return
	}
	d, lerr := u.loadPlaybook(r, s, name)
	if lerr != nil {
		u.fail(w, r, s, err)
		return
	}
	for i := range d.Form {
		if d.Form[i].Secret {
			delete(entered, d.Form[i].Name) // a secret is never sent back
		}
	}
	d.Errors = placeProblems(d.Form, entered, ae, "input ")
	u.render(w, r, ae.Status, "playbook", u.playbookView(s, d))
}
