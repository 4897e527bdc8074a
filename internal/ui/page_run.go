package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// maxRunEvents is the most events a run page reads (the live stream
// goes on from the last).
const maxRunEvents = 50000

// maxEventLog is the most events the page's whole event log lists; a
// longer log lists the run's own events only.
const maxEventLog = 2000

// runData is the run page's.
type runData struct {
	Run      api.Run
	Def      *api.Definition
	DefError string
	Events   []state.Event
	Views    []eventView // Events, formatted
	// EventLog is what the page's event log lists: every event, or when
	// there are more than maxEventLog only the run's own
	// (EventLogRunOnly), each step's being under the step already.
	EventLog        []eventView
	EventLogRunOnly bool
	LastSeq         uint64
	Truncated       bool
	Steps           []*stepView
	Graphs          []*graph
	Timeline        *timeline
	Approval        *approvalView
	// RetrySteps are the steps a retry may start from; RetryFrom the one
	// proposed.
	RetrySteps   []string
	RetryFrom    string
	SecretInputs []string
	// ActionError is the refusal of the last cancel, retry or resume.
	ActionError string
	// printed holds what each step printed (page_run_output.go);
	// OutputTruncated says the page read only the first maxRunOutput lines.
	printed         map[string][]printedLine
	OutputTruncated bool
	OutputAfter     uint64 // the last line read: the live stream goes on from it

	statuses map[string][2]string // by step ID, see stepStatus
	query    url.Values           // the page's, for the pages of for_each items
	// Query is the page's search (?q=): only the lines printed and the
	// events that hold it are shown, and the steps that have some;
	// Matches counts them.
	Query      string
	Matches    int
	lowerQuery string
}

// Done reports whether the run ended.
func (d *runData) Done() bool { return d.Run.Status.Done() }

// Retryable reports whether the run may be retried (failed or cancelled).
func (d *runData) Retryable() bool {
	return d.Run.Status == state.RunFailed || d.Run.Status == state.RunCancelled
}

// Resumable reports whether the run may be resumed here: cancelled, or
// unfinished with nothing executing it (the API may call such a run
// interrupted).
func (d *runData) Resumable() bool {
	return d.Run.ParentID == "" && (d.Run.Status == state.RunCancelled || (!d.Run.Status.Done() && !d.Run.Executing))
}

// eventView is an event as the page lists it, formatted once (a run of
// a thousand steps lists thousands).
type eventView struct {
	Seq                                             uint64
	Type, Class, Step, Message, KV, Clock, ISO, Abs string
}

func viewEvent(ev state.Event) eventView {
	v := eventView{Seq: ev.Seq, Type: ev.Type, Step: ev.Step, Message: ev.Message,
		Class: "ev ev-" + strings.ReplaceAll(ev.Type, ".", "-"),
		Clock: ev.Time.UTC().Format("15:04:05.000"), ISO: ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Abs: absTime(ev.Time)}
	if ev.Level != "" {
		v.Class += " lvl-" + strings.ToLower(ev.Level)
	}
	if len(ev.Data) > 0 {
		v.KV = kvText(ev.Data)
	}
	return v
}

// approvalView is the form of the approval a run waits on.
type approvalView struct {
	Step      string
	Message   string
	Approvers []string
	Deadline  time.Time
	Fields    []fieldView
	Comment   string
	Errors    []string
}

// fieldView is one typed field of a form.
type fieldView struct {
	// Key is the form's name of the field (its name with a prefix).
	Key         string
	Name, Type  string
	Required    bool
	Secret      bool
	Description string
	Enum        []string
	Default     string
	Hint        string
	Value       string
	Error       string
}

// Input is the HTML input type of the field. A number is a text field
// with a numeric keyboard (Mode), not type number: the browser would
// refuse "12a" silently, and the API's own message about it is the one
// to show.
func (f fieldView) Input() string {
	if f.Secret {
		return "password"
	}
	return "text"
}

// Mode is the inputmode hint of the field for on-screen keyboards.
func (f fieldView) Mode() string {
	switch f.Type {
	case "integer":
		return "numeric"
	case "number":
		return "decimal"
	}
	return "text"
}

func (u *UI) runPage(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := u.loadRun(r, s, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "run", u.runView(s, d))
}

func (u *UI) runView(s *session, d *runData) *view {
	return &view{Title: "Run " + d.Run.ID, Nav: "runs", session: s, Data: d}
}

// loadRun reads a run, its events and its definition through the API and
// lays the page out.
func (u *UI) loadRun(r *http.Request, s *session, id string) (*runData, error) {
	ctx := r.Context()
	d := &runData{query: r.URL.Query(), Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	d.lowerQuery = strings.ToLower(d.Query)
	esc := url.PathEscape(id)
	if err := u.get(ctx, s, "/api/v1/runs/"+esc, &d.Run); err != nil {
		return nil, err
	}
	for {
		var page api.EventPage
		if err := u.get(ctx, s, fmt.Sprintf("/api/v1/runs/%s/events?after=%d&limit=10000", esc, d.LastSeq), &page); err != nil {
			return nil, err
		}
		d.Events = append(d.Events, page.Events...)
		if n := len(page.Events); n > 0 {
			d.LastSeq = page.Events[n-1].Seq
		}
		if len(page.Events) < 10000 {
			break
		}
		if len(d.Events) >= maxRunEvents {
			d.Truncated = true
			break
		}
	}
	if err := u.loadOutput(ctx, s, esc, d); err != nil {
		return nil, err
	}
	var def api.Definition
	if err := u.get(ctx, s, "/api/v1/runs/"+esc+"/definition", &def); err != nil {
		d.DefError = err.Error()
	} else {
		d.Def = &def
	}
	now := u.o.Now()
	d.build(now)
	return d, nil
}

// baseID is a step ID without its for_each item index.
func baseID(id string) string {
	if i := strings.IndexByte(id, '['); i > 0 {
		return id[:i]
	}
	return id
}

// build lays out the steps, graphs, timeline and forms.
func (d *runData) build(now time.Time) {
	specs := map[string]*api.StepSpec{}
	if d.Def != nil {
		for li := range d.Def.Lists {
			for si := range d.Def.Lists[li].Steps {
				sp := &d.Def.Lists[li].Steps[si]
				specs[sp.ID] = sp
			}
		}
	}
	byStep := map[string][]eventView{}
	d.Views = make([]eventView, len(d.Events))
	for i, ev := range d.Events {
		d.Views[i] = viewEvent(ev)
		if ev.Step != "" && (d.Query == "" || d.matches(ev.Message)) {
			if d.Query != "" {
				d.Matches++
			}
			byStep[ev.Step] = append(byStep[ev.Step], d.Views[i])
		}
	}
	d.EventLog = d.Views
	if len(d.Views) > maxEventLog {
		d.EventLog, d.EventLogRunOnly = nil, true
		for _, v := range d.Views {
			if v.Step == "" {
				d.EventLog = append(d.EventLog, v)
			}
		}
	}
	d.buildSteps(specs, byStep)
	if d.Def != nil {
		for _, l := range d.Def.Lists {
			d.Graphs = append(d.Graphs, layoutGraph(l.Name, l.Steps, d.nodeInfo(now)))
		}
		d.retryChoices()
	}
	d.Timeline = buildTimeline(&d.Run, d.Events, now)
	d.approval()
}

// stepStatus is a step's status: its record's, or for a for_each step
// the status of its items taken together; a step without a record is
// pending.
func (d *runData) stepStatus(id string) (string, string) {
	if st, ok := d.statusesMap()[id]; ok {
		return st[0], st[1]
	}
	return "pending", ""
}

// statusesOf is the graph status of every step that has records.
func statusesOf(recs []api.RunStep) map[string][2]string {
	out := map[string][2]string{}
	counts := map[string]map[state.StepStatus]int{}
	var order []string
	for _, rec := range recs {
		base := baseID(rec.ID)
		if base == rec.ID {
			out[rec.ID] = [2]string{string(rec.Status), ""}
			continue
		}
		if counts[base] == nil {
			counts[base] = map[state.StepStatus]int{}
			order = append(order, base)
		}
		counts[base][rec.Status]++
	}
	for _, base := range order {
		c := counts[base]
		items := 0
		for _, n := range c {
			items += n
		}
		detail := fmt.Sprintf("%d/%d", items-c[state.StepRunning]-c[state.StepWaiting]-c[state.StepPending], items)
		if own, ok := out[base]; ok { // the step's own record says its status
			out[base] = [2]string{own[0], detail}
			continue
		}
		status := string(state.StepSkipped)
		if c[state.StepSucceeded] > 0 {
			status = string(state.StepSucceeded)
		}
		for _, st := range []state.StepStatus{state.StepPending, state.StepCancelled, state.StepFailed, state.StepWaiting, state.StepRunning} {
			if c[st] > 0 {
				status = string(st)
			}
		}
		out[base] = [2]string{status, detail}
	}
	return out
}

func (d *runData) statusesMap() map[string][2]string {
	if d.statuses == nil {
		d.statuses = statusesOf(d.Run.Steps)
		if d.Run.Status == state.RunInterrupted {
			// Recorded running, but nothing runs them (stepView.Interrupted).
			for id, st := range d.statuses {
				if st[0] == string(state.StepRunning) {
					d.statuses[id] = [2]string{string(state.RunInterrupted), st[1]}
				}
			}
		}
	}
	return d.statuses
}

// retryChoices lists the steps a retry may start from and proposes the
// first one that did not succeed.
func (d *runData) retryChoices() {
	for _, sp := range d.Def.Lists[0].Steps {
		d.RetrySteps = append(d.RetrySteps, sp.ID)
		if d.RetryFrom == "" {
			if st, _ := d.stepStatus(sp.ID); st != string(state.StepSucceeded) && st != string(state.StepSkipped) {
				d.RetryFrom = sp.ID
			}
		}
	}
	for _, in := range d.Def.Inputs {
		if in.Secret {
			d.SecretInputs = append(d.SecretInputs, in.Name)
		}
	}
}

// approval builds the form of the approval the run waits on.
func (d *runData) approval() {
	if d.Run.WaitingFor == nil {
		return
	}
	a := &approvalView{Step: d.Run.WaitingFor.Step}
	for _, ev := range d.Events {
		if ev.Type == "approval.requested" && ev.Step == a.Step {
			a.Message = ev.Message
		}
	}
	// The question as the step asks it, without the log's wording around
	// it: its message param, resolved.
	if d.Def != nil {
		for _, l := range d.Def.Lists {
			for _, sp := range l.Steps {
				if sp.ID != baseID(a.Step) {
					continue
				}
				for _, p := range sp.With {
					if msg, ok := p.Value.(string); ok && p.Name == "message" && p.Known {
						a.Message = msg
					}
				}
			}
		}
	}
	for _, rec := range d.Run.Steps {
		if rec.ID != a.Step || rec.Approval == nil {
			continue
		}
		a.Approvers, a.Deadline = rec.Approval.Approvers, rec.Approval.Deadline
		names := make([]string, 0, len(rec.Approval.Fields))
		for name := range rec.Approval.Fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			f := rec.Approval.Fields[name]
			a.Fields = append(a.Fields, fieldView{Name: name, Type: f.Type, Required: f.Required})
		}
	}
	d.Approval = a
}
