package ui

import (
	"net/url"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// itemsPageSize is how many items of a for_each step a run page shows at
// once; the others are a page away (?page.STEP=N).
const itemsPageSize = 20

// stepView is one step record with its log and what it was asked to do.
type stepView struct {
	Rec    api.RunStep
	Spec   *api.StepSpec
	Events []eventView
	// NotRun marks a step of the playbook that has no record (not
	// reached); Why says why when the run ended without it.
	NotRun bool
	Why    string
	ID     string
	Uses   string
	Status string
	// Printed is what the step printed (its stdout and stderr, its calls).
	Printed []printedLine
	// Running: the step's record says running and a process runs the run;
	// the page shows its time going by and fills its lines as printed.
	// Interrupted: it says running, but the process that ran it is gone
	// (the run is shown interrupted): nothing runs it until a resume.
	Running, Interrupted bool
	// Items is the page of a for_each step's items the page shows; Item
	// marks one of those items.
	Items *itemsView
	Item  bool
	// Found marks a step with lines or events that hold the page's search.
	Found bool
}

// Open reports whether the step's outputs, lines and log are shown
// unfolded: those of a step that failed, runs or waits; a finished
// step's are one click away.
func (s *stepView) Open() bool {
	if s.Found {
		return true
	}
	switch s.Status {
	case string(state.StepFailed), string(state.StepRunning), string(state.StepWaiting), string(state.RunInterrupted):
		return true
	}
	return false
}

// itemsView is a for_each step's items: the page shown, the counts, and
// where the items that failed are.
type itemsView struct {
	Shown            []*stepView
	Total, Done      int
	From, To         int // the items shown, [From, To) by position
	Page, Pages      int
	PrevURL, NextURL string
	Failed           []itemLink // every failed item, on whichever page
	StepID           string
	pageParam        string
	query            string // the page's search, kept by its links
}

// itemLink links to an item on its page of the run page.
type itemLink struct{ ID, URL string }

// pageURL is the link to page n of the step's items, at the step.
func (v *itemsView) pageURL(n int, at string) string {
	q := url.Values{}
	if n > 1 {
		q.Set(v.pageParam, strconv.Itoa(n))
	}
	if v.query != "" {
		q.Set("q", v.query)
	}
	u := "?" + q.Encode()
	return u + "#step-" + at
}

// buildSteps lays out the run's steps: one view per record in the order
// they were first saved, a for_each step's items under it (a page of
// them), then the steps of the playbook that have no record.
func (d *runData) buildSteps(specs map[string]*api.StepSpec, byStep map[string][]eventView) {
	groups := map[string]*stepView{}
	var items = map[string][]*stepView{}
	seen := map[string]bool{}
	for _, rec := range d.Run.Steps {
		sv := &stepView{Rec: rec, Spec: specs[baseID(rec.ID)], Events: byStep[rec.ID], ID: rec.ID, Status: string(rec.Status), Printed: d.printed[rec.ID]}
		if rec.Status == state.StepRunning {
			sv.Interrupted = d.Run.Status == state.RunInterrupted
			sv.Running = !sv.Interrupted
			if sv.Interrupted {
				sv.Status = string(state.RunInterrupted)
			}
		}
		if sv.Spec != nil {
			sv.Uses = sv.Spec.Uses
		}
		sv.Found = d.Query != "" && (len(sv.Printed) > 0 || len(sv.Events) > 0)
		seen[rec.ID] = true
		base := baseID(rec.ID)
		if base == rec.ID {
			if g, ok := groups[base]; ok { // its items came first
				sv.Items = g.Items
				*g = *sv
				continue
			}
			groups[base] = sv
			d.Steps = append(d.Steps, sv)
			continue
		}
		if _, ok := groups[base]; !ok {
			// Its own record is not written yet: its items say.
			st, _ := d.stepStatus(base)
			g := &stepView{Rec: api.RunStep{StepRecord: &state.StepRecord{RunID: d.Run.ID, ID: base, Status: state.StepStatus(st)}},
				Spec: specs[base], ID: base, Status: st}
			if g.Spec != nil {
				g.Uses = g.Spec.Uses
			}
			groups[base] = g
			d.Steps = append(d.Steps, g)
		}
		sv.Item = true
		if d.Query == "" || sv.Found {
			items[base] = append(items[base], sv)
		}
	}
	for base, list := range items {
		groups[base].Items = d.pageItems(base, list)
	}
	if d.Query != "" { // a search shows the steps it found, and no others
		kept := d.Steps[:0]
		for _, sv := range d.Steps {
			if sv.Found || sv.Items != nil {
				kept = append(kept, sv)
			}
		}
		d.Steps = kept
		return
	}
	if d.Def == nil {
		return
	}
	for li, l := range d.Def.Lists {
		for i := range l.Steps {
			sp := &l.Steps[i]
			if seen[sp.ID] || groups[sp.ID] != nil {
				continue
			}
			sv := &stepView{Spec: sp, ID: sp.ID, Uses: sp.Uses, NotRun: true, Status: "pending"}
			if d.Done() {
				sv.Status, sv.Why = string(state.StepSkipped), "the run ended before it"
				if li > 0 && l.Name == "on_failure" && d.Run.Status != state.RunFailed {
					sv.Why = "on_failure steps run only when the run fails"
				}
			}
			d.Steps = append(d.Steps, sv)
		}
	}
}

// pageItems is the page of a for_each step's items the page asks for
// (?page.STEP=N, the first by default).
func (d *runData) pageItems(base string, list []*stepView) *itemsView {
	v := &itemsView{Total: len(list), pageParam: "page." + base, StepID: base, query: d.Query}
	for _, it := range list {
		if st := it.Rec.Status; st != state.StepRunning && st != state.StepWaiting && st != state.StepPending {
			v.Done++
		}
	}
	v.Pages = max(1, (len(list)+itemsPageSize-1)/itemsPageSize)
	v.Page = 1
	if n, err := strconv.Atoi(d.query.Get(v.pageParam)); err == nil && n >= 1 {
		v.Page = min(n, v.Pages)
	}
	v.From = (v.Page - 1) * itemsPageSize
	v.To = min(v.From+itemsPageSize, len(list))
	v.Shown = list[v.From:v.To]
	for i, it := range list {
		if it.Rec.Status == state.StepFailed {
			v.Failed = append(v.Failed, itemLink{ID: it.ID, URL: v.pageURL(i/itemsPageSize+1, it.ID)})
		}
	}
	if v.Page > 1 {
		v.PrevURL = v.pageURL(v.Page-1, base)
	}
	if v.Page < v.Pages {
		v.NextURL = v.pageURL(v.Page+1, base)
	}
	return v
}

// nodeInfo gives the graph each step's status, its for_each count and
// how long it ran (going by while it runs).
func (d *runData) nodeInfo(now time.Time) func(id string) nodeState {
	recs := map[string]api.RunStep{}
	for _, rec := range d.Run.Steps {
		recs[rec.ID] = rec
	}
	return func(id string) nodeState {
		st, count := d.stepStatus(id)
		if _, ok := d.statusesMap()[id]; !ok && d.Done() {
			st = string(state.StepSkipped)
		}
		n := nodeState{Status: st, Count: count}
		if rec, ok := recs[id]; ok && !rec.StartedAt.IsZero() {
			end := rec.EndedAt
			if end.IsZero() && d.Done() {
				return n
			}
			n.Duration = span(now, rec.StartedAt, end)
		}
		return n
	}
}
