package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// maxApprovals is the most waiting runs the approvals page lists.
const maxApprovals = 200

// approvalsData is the approvals page's.
type approvalsData struct {
	Items []approvalItem
}

type approvalItem struct {
	Run      api.Run
	Approval *approvalView
}

func (u *UI) approvalsPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	var list api.RunList
	// A run that waits on an approval in this server stays running; one
	// parked by another process is waiting.
	if err := u.get(ctx, s, runsPath(api.RunQuery{Status: []state.RunStatus{state.RunWaiting, state.RunRunning}, Children: true, Limit: maxApprovals}), &list); err != nil {
		u.fail(w, r, s, err)
		return
	}
	d := &approvalsData{}
	for _, run := range list.Runs {
		rd := &runData{}
		esc := url.PathEscape(run.ID)
		if err := u.get(ctx, s, "/api/v1/runs/"+esc, &rd.Run); err != nil || rd.Run.WaitingFor == nil {
			continue // not waiting for an approval (or gone meanwhile)
		}
		var page api.EventPage
		if err := u.get(ctx, s, "/api/v1/runs/"+esc+"/events?limit=10000", &page); err == nil {
			rd.Events = page.Events
		}
		var def api.Definition
		if err := u.get(ctx, s, "/api/v1/runs/"+esc+"/definition", &def); err == nil {
			rd.Def = &def
		}
		rd.approval()
		if rd.Approval != nil {
			d.Items = append(d.Items, approvalItem{Run: rd.Run, Approval: rd.Approval})
		}
	}
	u.render(w, r, http.StatusOK, "approvals", &view{Title: "Approvals", Nav: "approvals", session: s, Data: d})
}

// deliveriesData is the webhook deliveries page's.
type deliveriesData struct {
	List     api.DeliveryList
	Route    string
	Outcome  string
	Outcomes []string
}

func (u *UI) deliveriesPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &deliveriesData{Route: q.Get("route"), Outcome: q.Get("outcome"), Outcomes: []string{"accepted", "duplicate", "refused"}}
	aq := url.Values{}
	if d.Route != "" {
		aq.Set("route", d.Route)
	}
	if d.Outcome != "" {
		aq.Set("outcome", d.Outcome)
	}
	if err := u.get(r.Context(), s, "/api/v1/deliveries?"+aq.Encode(), &d.List); err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "deliveries", &view{Title: "Webhook deliveries", Nav: "deliveries", session: s, Data: d})
}

// healthData is the health page's: /healthz and a summary of /metrics.
type healthData struct {
	Health   api.Health
	Drain    api.Drain
	LoadedAt time.Time
	Groups   []metricGroup
	Error    string
}

// metricGroup is one metric family summed by one label.
type metricGroup struct {
	Title string
	Rows  []metricRow
}

type metricRow struct {
	Label string
	Value string
}

func (u *UI) healthPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := &healthData{}
	if err := u.get(r.Context(), s, "/healthz", &d.Health); err != nil {
		u.fail(w, r, s, err)
		return
	}
	d.LoadedAt, _ = time.Parse(time.RFC3339, d.Health.LoadedAt)
	if err := u.get(r.Context(), s, "/api/v1/drain", &d.Drain); err != nil {
		d.Error = err.Error()
	}
	text, err := u.text(r.Context(), s, "/metrics")
	if err != nil {
		d.Error = err.Error()
	} else {
		d.Groups = summarize(parseMetrics(text))
	}
	u.render(w, r, http.StatusOK, "health", &view{Title: "Health", Nav: "health", session: s, Data: d})
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the samples of the Prometheus text format.
func parseMetrics(text string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			sp.name = line[:i]
			for _, kv := range splitLabels(line[i+1 : j]) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					sp.labels[k], _ = strconv.Unquote(v)
				}
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			name, val, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			sp.name, rest = name, val
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sp.value = v
		out = append(out, sp)
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// summaries are the metric families the health page shows, each summed
// by one label ("" for a single value).
var summaries = []struct {
	title, name, label, unit string
}{
	{"Runs in the store, by status", "runbook_runs", "status", ""},
	{"Runs executing here, parked ones included", "runbook_runs_executing", "", ""},
	{"Runs parked here (waiting with no goroutine)", "runbook_runs_parked", "", ""},
	{"Runs queued for an execution slot", "runbook_runs_queued", "", ""},
	{"Playbooks loaded", "runbook_playbooks", "", ""},
	{"Webhook deliveries, by outcome", "runbook_webhook_deliveries_total", "outcome", ""},
	{"Schedule slots, by outcome", "runbook_schedule_firings_total", "outcome", ""},
	{"Steps finished, by outcome", "runbook_step_duration_seconds_count", "outcome", ""},
	{"Step time, by outcome", "runbook_step_duration_seconds_sum", "outcome", "s"},
	{"Runs recovered, by reason", "runbook_runs_recovered_total", "reason", ""},
	{"Reloads, by result", "runbook_reloads_total", "result", ""},
	{"Uptime", "runbook_uptime_seconds", "", "s"},
	{"Goroutines", "go_goroutines", "", ""},
	{"Resident memory", "process_resident_memory_bytes", "", "MiB"},
	{"Heap in use", "go_memstats_heap_inuse_bytes", "", "MiB"},
}

func summarize(samples []sample) []metricGroup {
	var out []metricGroup
	for _, sm := range summaries {
		sums := map[string]float64{}
		found := false
		for _, sp := range samples {
			if sp.name == sm.name {
				sums[sp.labels[sm.label]] += sp.value
				found = true
			}
		}
		if !found {
			continue
		}
		keys := make([]string, 0, len(sums))
		for k := range sums {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		g := metricGroup{Title: sm.title}
		for _, k := range keys {
			g.Rows = append(g.Rows, metricRow{Label: k, Value: metricValue(sums[k], sm.unit)})
		}
		out = append(out, g)
	}
	return out
}

func metricValue(v float64, unit string) string {
	switch unit {
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case "s":
		return fmtDuration(time.Duration(v * float64(time.Second)))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// drainServer begins draining the server (POST /api/v1/drain) with the
// form's reason and grace, and shows the health page with its status.
func (u *UI) drainServer(w http.ResponseWriter, r *http.Request, s *session) {
	if !u.permitted(w, r, s, Admin, "") {
		return
	}
	body := api.DrainRequest{Reason: strings.TrimSpace(r.PostFormValue("reason")), Grace: strings.TrimSpace(r.PostFormValue("grace"))}
	var d api.Drain
	if err := u.call(r.Context(), s, http.MethodPost, "/api/v1/drain", body, &d); err != nil {
		u.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/health#drain", http.StatusSeeOther)
}
