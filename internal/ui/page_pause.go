package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/runbook/runbook/internal/api"
)

// Run pauses from a playbook's page: pause its runs with a reason (a
// pause of its name, POST /api/v1/pauses), or lift the pause that holds
// them (DELETE /api/v1/pauses/{id}). A refusal (no reason, paused
// already) shows the page again with why.

// pausePlaybook pauses the runs of the playbook in the path.
func (u *UI) pausePlaybook(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	if !u.permitted(w, r, s, PauseRuns, name) {
		return
	}
	body := api.PauseRequest{Pattern: name, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	var ans api.PauseAnswer
	u.pauseDone(w, r, s, name, u.call(r.Context(), s, http.MethodPost, "/api/v1/pauses", body, &ans))
}

// resumePlaybook lifts the pause named in the form, from the page of the
// playbook in the path.
func (u *UI) resumePlaybook(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	if !u.permitted(w, r, s, PauseRuns, name) {
		return
	}
	var ans api.PauseAnswer
	err := u.call(r.Context(), s, http.MethodDelete, "/api/v1/pauses/"+url.PathEscape(r.PostFormValue("pause")), nil, &ans)
	u.pauseDone(w, r, s, name, err)
}

// pauseDone shows the playbook's page after a pause or a resume: again,
// or with why the API refused it.
func (u *UI) pauseDone(w http.ResponseWriter, r *http.Request, s *session, name string, err error) {
	if err == nil {
		http.Redirect(w, r, "/playbooks/"+url.PathEscape(name)+"#pause", http.StatusSeeOther)
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
	d.PauseError = ae.Error()
	u.render(w, r, ae.Status, "playbook", u.playbookView(s, d))
}
