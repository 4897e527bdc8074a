package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/api"
)

// schedulesData is the schedules page's: every schedule with its pause
// and recent slots, and the outcome of the last action on one.
type schedulesData struct {
	*api.ScheduleList
	// Done says what the last pause, resume or run now did; Error why it
	// was refused.
	Done, Error string
	// Backfill is the answer of the last backfill (or dry run).
	Backfill *api.BackfillAnswer
	// At names the schedule (playbook-trigger) Done, Error or Backfill is
	// about.
	At string
}

func (u *UI) schedulesPage(w http.ResponseWriter, r *http.Request, s *session) {
	u.renderSchedules(w, r, s, http.StatusOK, &schedulesData{Done: r.URL.Query().Get("done"), At: r.URL.Query().Get("at")})
}

func (u *UI) renderSchedules(w http.ResponseWriter, r *http.Request, s *session, status int, d *schedulesData) {
	d.ScheduleList = &api.ScheduleList{}
	if err := u.get(r.Context(), s, "/api/v1/schedules", d.ScheduleList); err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, status, "schedules", &view{Title: "Schedules", Nav: "schedules", session: s, Data: d})
}

// scheduleForm reads the playbook and trigger a schedule form is about.
func scheduleForm(r *http.Request) (name string, trigger *int, at string) {
	name = r.PathValue("name")
	at = name
	if v := r.PostFormValue("trigger"); v != "" {
		if i, err := strconv.Atoi(v); err == nil && i >= 0 {
			trigger = &i
			at = fmt.Sprintf("%s-%d", name, i)
		}
	}
	return name, trigger, at
}

// scheduleAction sends a pause, resume or run now of a schedule and shows
// the schedules page again with what it did or why it was refused.
func (u *UI) scheduleAction(action string, a Action) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		name, trigger, at := scheduleForm(r)
		if !u.permitted(w, r, s, a, name) {
			return
		}
		if r.PostFormValue("all") != "" {
			trigger = nil // a pause of every schedule trigger of the playbook
		}
		body := api.ScheduleControl{Trigger: trigger, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
		path := "/api/v1/playbooks/" + url.PathEscape(name) + "/schedules/" + action
		var done string
		var err error
		if action == "run" {
			var run api.Run
			if err = u.call(r.Context(), s, http.MethodPost, path, body, &run); err == nil {
				http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
				return
			}
		} else {
			var ans api.SchedulePauseAnswer
			if err = u.call(r.Context(), s, http.MethodPost, path, body, &ans); err == nil {
				done = ans.Status
			}
		}
		if err == nil && r.PostFormValue("back") == "playbook" { // a form of the playbook's page
			http.Redirect(w, r, "/playbooks/"+url.PathEscape(name)+"?done="+url.QueryEscape(done)+"#triggers-title", http.StatusSeeOther)
			return
		}
		if err == nil {
			http.Redirect(w, r, "/schedules?done="+url.QueryEscape(done)+"&at="+url.QueryEscape(at)+"#sched-"+url.PathEscape(at), http.StatusSeeOther)
			return
		}
		ae, ok := err.(*APIError)
		if !ok || ae.Status >= 500 {
			u.fail(w, r, s, err)
			return
		}
		u.renderSchedules(w, r, s, ae.Status, &schedulesData{Error: ae.Error(), At: at})
	}
}

// backfillSchedule sends a backfill (or its dry run) of a schedule and
// shows its answer on the schedules page.
func (u *UI) backfillSchedule(w http.ResponseWriter, r *http.Request, s *session) {
	name, trigger, at := scheduleForm(r)
	if !u.permitted(w, r, s, StartRun, name) {
		return
	}
	body := api.BackfillRequest{Trigger: trigger, From: localTime(r.PostFormValue("from")), To: localTime(r.PostFormValue("to")),
		DryRun: r.PostFormValue("dry_run") != ""}
	var ans api.BackfillAnswer
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/playbooks/"+url.PathEscape(name)+"/schedules/backfill", body, &ans)
	if err == nil {
		u.renderSchedules(w, r, s, http.StatusOK, &schedulesData{Backfill: &ans, At: at})
		return
	}
	ae, ok := err.(*APIError)
	if !ok || ae.Status >= 500 {
		u.fail(w, r, s, err)
		return
	}
	u.renderSchedules(w, r, s, ae.Status, &schedulesData{Error: ae.Error(), At: at})
}

// localTime reads a datetime-local field (2026-11-20T03:00, in UTC as the
// form says) as RFC 3339; anything else is sent as written for the API to
// refuse.
func localTime(v string) string {
	v = strings.TrimSpace(v)
	switch len(v) {
	case len("2006-01-02T15:04"):
		return v + ":00Z"
	case len("2006-01-02T15:04:05"):
		return v + "Z"
	}
	return v
}

// rerunRun starts a new run of the run with its inputs (its secret ones
// given again) and goes to it.
func (u *UI) rerunRun(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := u.runAction(w, r, s, StartRun)
	if !ok {
		return
	}
	var next api.Run
	err := u.call(r.Context(), s, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/rerun", api.RerunRequest{Inputs: secretInputs(r)}, &next)
	target := ""
	if err == nil {
		target = "/runs/" + url.PathEscape(next.ID)
	}
	u.afterAction(w, r, s, id, err, target, nil)
}
