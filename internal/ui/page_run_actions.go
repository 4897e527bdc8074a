package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/api"
)

// runLive passes the API's event stream of a run through to the page
// (GET /api/v1/runs/{id}/logs), with the lines the steps print, as the
// session.
func (u *UI) runLive(w http.ResponseWriter, r *http.Request, s *session) {
	path := "/api/v1/runs/" + url.PathEscape(r.PathValue("id")) + "/logs?output=true"
	for _, p := range []string{"after", "output_after"} {
		if v := r.URL.Query().Get(p); v != "" {
			path += "&" + p + "=" + url.QueryEscape(v)
		}
	}
	req, err := apiRequest(r.Context(), s, http.MethodGet, path, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	u.o.API.ServeHTTP(w, req)
}

// listsLive passes the API's stream of run changes through to the lists
// (GET /api/v1/changes), as the session: the runs list and the playbooks
// page read themselves again when it says "changed".
func (u *UI) listsLive(w http.ResponseWriter, r *http.Request, s *session) {
	req, err := apiRequest(r.Context(), s, http.MethodGet, "/api/v1/changes", nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.o.API.ServeHTTP(w, req)
}

// afterAction re-renders the run page with the refusal of an action, or
// goes to target. place puts the refusal on the page (nil: above the
// run, as ActionError).
func (u *UI) afterAction(w http.ResponseWriter, r *http.Request, s *session, id string, err error, target string, place func(*runData, *APIError)) {
	if err == nil {
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	ae, ok := err.(*APIError)
	if !ok {
		u.fail(w, r, s, err)
		return
	}
	d, lerr := u.loadRun(r, s, id)
	if lerr != nil {
		u.fail(w, r, s, err)
		return
	}
	if place != nil {
		place(d, ae)
	} else {
		d.ActionError = ae.Error()
	}
	u.render(w, r, ae.Status, "run", u.runView(s, d))
}

func (u *UI) cancelRun(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := u.runAction(w, r, s, CancelRun)
	if !ok {
		return
	}
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/cancel?by="+url.QueryEscape(s.by()), nil, nil)
	u.afterAction(w, r, s, id, err, "/runs/"+url.PathEscape(id), nil)
}

// secretInputs reads the secret inputs a retry or resume gives again.
func secretInputs(r *http.Request) map[string]any {
	var out map[string]any
	for k, vs := range r.PostForm {
		name, ok := strings.CutPrefix(k, "in.")
		if !ok || len(vs) == 0 || vs[0] == "" {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[name] = vs[0]
	}
	return out
}

func (u *UI) retryRun(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := u.runAction(w, r, s, RetryRun)
	if !ok {
		return
	}
	body := api.RetryRequest{From: r.PostFormValue("from"), Inputs: secretInputs(r)}
	var next api.Run
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/retry", body, &next)
	target := ""
	if err == nil {
		target = "/runs/" + url.PathEscape(next.ID)
	}
	u.afterAction(w, r, s, id, err, target, nil)
}

func (u *UI) resumeRun(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := u.runAction(w, r, s, ResumeRun)
	if !ok {
		return
	}
	body := api.ResumeRequest{Inputs: secretInputs(r)}
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/resume", body, nil)
	u.afterAction(w, r, s, id, err, "/runs/"+url.PathEscape(id), nil)
}

// fieldValue converts a form value to its field's type, as a JSON client
// would send it. A value that does not parse is sent as written, so that
// the API refuses it with its own message.
func fieldValue(typ, v string) any {
	switch typ {
	case "integer":
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			return f
		}
	case "boolean":
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b
		}
	}
	return v
}

// approveRun answers the approval with the form's fields. A refused
// answer shows the page again with each problem beside its field; the
// run keeps waiting.
func (u *UI) approveRun(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	approve := r.PostFormValue("decision") == "approve"
	body := api.ApproveRequest{Step: r.PostFormValue("step"), Approve: &approve, By: s.by(), Comment: r.PostFormValue("comment")}
	entered := map[string]string{}
	for k, vs := range r.PostForm {
		if name, ok := strings.CutPrefix(k, "f."); ok && len(vs) > 0 {
			entered[name] = vs[0]
		}
	}
	// The fields' types are the waiting step's: read them to send each
	// value as its type.
	var run api.Run
	if err := u.get(r.Context(), s, "/api/v1/runs/"+url.PathEscape(id), &run); err != nil {
		u.fail(w, r, s, err)
		return
	}
	if !u.permitted(w, r, s, ApproveRun, run.Playbook) {
		return
	}
	types := map[string]string{}
	for _, rec := range run.Steps {
		if rec.ID == body.Step && rec.Approval != nil {
			for name, f := range rec.Approval.Fields {
				types[name] = f.Type
			}
		}
	}
	if approve {
		for name, v := range entered {
			if v == "" {
				continue
			}
			if body.Fields == nil {
				body.Fields = map[string]any{}
			}
			body.Fields[name] = fieldValue(types[name], v)
		}
	}
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/approve", body, nil)
	u.afterAction(w, r, s, id, err, "/runs/"+url.PathEscape(id)+"#step-"+url.PathEscape(body.Step), func(d *runData, ae *APIError) {
		if d.Approval == nil {
			d.ActionError = ae.Error()
			return
		}
		d.Approval.Comment = body.Comment
		d.Approval.Errors = placeProblems(d.Approval.Fields, entered, ae, "field ")
	})
}

// placeProblems puts each problem of an API refusal beside the field it
// names ("field ticket is required", `input "count": ...`), fills in the
// values entered, and returns the problems that name no field.
func placeProblems(fields []fieldView, entered map[string]string, ae *APIError, prefix string) []string {
	problems := ae.Problems
	if len(problems) == 0 {
		problems = splitProblems(ae.ErrorBody.Error)
	}
	var general []string
	if len(ae.Problems) > 0 {
		general = append(general, ae.ErrorBody.Error)
	}
	for i := range fields {
		fields[i].Value = entered[fields[i].Name]
	}
	for _, p := range problems {
		placed := false
		for i := range fields {
			name := fields[i].Name
			if strings.HasPrefix(p, prefix+name+" ") || strings.HasPrefix(p, prefix+`"`+name+`"`) {
				if fields[i].Error != "" {
					fields[i].Error += "; "
				}
				fields[i].Error += p
				placed = true
			}
		}
		if !placed {
			general = append(general, p)
		}
	}
	return general
}

// splitProblems splits an API message that joins problems with "; "
// (the start of a run): a part that does not start a new problem about
// an input belongs to the one before.
func splitProblems(msg string) []string {
	var out []string
	for _, part := range strings.Split(msg, "; ") {
		if len(out) > 0 && !strings.HasPrefix(part, "input ") && !strings.HasPrefix(part, "unknown input ") {
			out[len(out)-1] += "; " + part
			continue
		}
		out = append(out, part)
	}
	return out
}

// fieldHint describes a field's constraints in words.
func fieldHint(in api.InputSpec) string {
	var parts []string
	if in.Pattern != "" {
		parts = append(parts, "pattern "+in.Pattern)
	}
	unit := ""
	if in.Type == "string" || in.Type == "" || in.Type == "list" {
		unit = " (length)"
	}
	if in.Min != nil {
		parts = append(parts, fmt.Sprintf("min %g%s", *in.Min, unit))
	}
	if in.Max != nil {
		parts = append(parts, fmt.Sprintf("max %g%s", *in.Max, unit))
	}
	if in.Type == "list" || in.Type == "map" {
		parts = append(parts, "JSON or YAML")
	}
	return strings.Join(parts, ", ")
}
