package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// runStatuses are the statuses a run list filters by.
var runStatuses = state.RunStatusNames()

// runsPath is the API's run listing of q.
func runsPath(q api.RunQuery) string { return "/api/v1/runs?" + q.Values().Encode() }

// runsPageSize is how many runs a page of the list shows.
const runsPageSize = 50

// triggerTypes are the trigger types a run list filters by.
var triggerTypes = []string{"api", "schedule", "webhook"}

// runsData is the runs page's.
type runsData struct {
	Status    []string
	Playbook  string
	Trigger   string
	Since     string
	Until     string
	Before    string
	Statuses  []string
	Triggers  []string
	Playbooks []string
	Runs      []api.Run
	// NextURL is the link to the following (older) page; FirstURL to the
	// first page of the same filter.
	NextURL  string
	FirstURL string
	Error    string
}

// filterQuery is the query string of the filter, without a cursor.
func (d *runsData) filterQuery() url.Values {
	q := url.Values{}
	for _, s := range d.Status {
		q.Add("status", s)
	}
	for k, v := range map[string]string{"playbook": d.Playbook, "trigger": d.Trigger, "since": d.Since, "until": d.Until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Active is how many filters are set (the folded filters say it).
func (d *runsData) Active() int { return len(d.filterQuery()) }

// Live reports whether the list follows new runs (the first page does).
func (d *runsData) Live() bool { return d.Before == "" }

func (u *UI) runsPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &runsData{Playbook: q.Get("playbook"), Trigger: q.Get("trigger"), Since: q.Get("since"), Until: q.Get("until"),
		Before: q.Get("before"), Statuses: runStatuses, Triggers: triggerTypes}
	for _, v := range q["status"] {
		for _, one := range strings.Split(v, ",") {
			if one != "" {
				d.Status = append(d.Status, one)
			}
		}
	}
	var pbs api.PlaybookList
	if err := u.get(r.Context(), s, "/api/v1/playbooks", &pbs); err != nil {
		u.fail(w, r, s, err)
		return
	}
	for _, pb := range pbs.Playbooks {
		d.Playbooks = append(d.Playbooks, pb.Name)
	}
	fq := d.filterQuery()
	d.FirstURL = "/runs"
	if len(fq) > 0 {
		d.FirstURL += "?" + fq.Encode()
	}
	aq := d.filterQuery()
	aq.Set("limit", strconv.Itoa(runsPageSize))
	if d.Before != "" {
		aq.Set("before", d.Before)
	}
	var page api.RunList
	status := http.StatusOK
	if err := u.get(r.Context(), s, "/api/v1/runs?"+aq.Encode(), &page); err != nil {
		ae, ok := err.(*APIError)
		if !ok || ae.Status != http.StatusBadRequest {
			u.fail(w, r, s, err)
			return
		}
		d.Error, status = ae.ErrorBody.Error, http.StatusBadRequest
	}
	d.Runs = page.Runs
	if page.Next != "" {
		fq.Set("before", page.Next)
		d.NextURL = "/runs?" + fq.Encode()
	}
	u.render(w, r, status, "runs", &view{Title: "Runs", Nav: "runs", session: s, Data: d})
}
