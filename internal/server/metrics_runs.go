package server

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// Run and step series carry two labels that say what a run is:
//
//   - playbook: the run's playbook name when a playbook of that name is
//     loaded from the playbook directory, else otherPlaybook. Playbooks
//     are few; a run of anything else (a `runbook run` of a file
//     elsewhere taken over by a replica, a playbook removed since) cannot
//     grow the label set.
//   - trigger: what started it: "schedule", "webhook", "api", "retry" (a
//     retry of a failed run), "rerun" (a run of an ended run again),
//     "playbook" (a sub-playbook run), "cli" (a
//     run without a trigger: `runbook run`), or another trigger type a
//     later start path records (a lowercase word of at most 16 letters),
//     else "other".

// otherPlaybook is the playbook label of a run whose playbook is not
// loaded.
const otherPlaybook = "_other"

// triggerWord is a trigger type kept as a label value.
var triggerWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z_]{0,15}$`) })

// playbookSource is what the per-run and per-playbook series read: the
// store (nil: none, the local socket's), the loaded playbooks, and
// whether this server fires their schedules.
type playbookSource struct {
	store     state.Store
	playbooks func() []*playbook.Playbook
	known     func(name string) bool
	schedules bool
}

// runLabel is what the series of one run are labelled with, and when it
// was created and started (for its duration).
type runLabel struct {
	playbook, trigger string
	name              string // the playbook's name (the label may be otherPlaybook)
	created, started  time.Time
	resolved          bool // read from the run's record
}

// runLabels keeps the labels of the runs this process saw a step or run
// end of, until the run ends here.
type runLabels struct {
	src  playbookSource
	mu   sync.Mutex
	runs map[string]runLabel
}

func newRunLabels(src playbookSource) *runLabels {
	return &runLabels{src: src, runs: map[string]runLabel{}}
}

// of returns run id's labels, reading its record the first time it is
// not known (a run launched here is: note). A record
// that cannot be read gives otherPlaybook and "unknown", and is read
// again at the next event.
func (l *runLabels) of(id string) runLabel {
	l.mu.Lock()
	lb, ok := l.runs[id]
	l.mu.Unlock()
	if ok && lb.resolved {
		return lb
	}
	fallback := runLabel{playbook: otherPlaybook, trigger: "unknown", started: lb.started}
	if l.src.store == nil {
		return fallback
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	r, err := l.src.store.GetRun(ctx, id)
	cancel()
	if err != nil {
		return fallback
	}
	return l.note(r)
}

// note keeps the labels of run r, as recorded (a run launched here, or
// read by of), and returns them.
func (l *runLabels) note(r *state.Run) runLabel {
	got := runLabel{playbook: l.playbookLabel(r.Playbook), trigger: triggerLabel(r), name: r.Playbook, created: r.CreatedAt, started: r.StartedAt, resolved: true}
	l.mu.Lock()
	defer l.mu.Unlock()
	if got.started.IsZero() {
		got.started = l.runs[r.ID].started
	}
	l.runs[r.ID] = got
	return got
}

// started notes when run id started (its run.started event).
func (l *runLabels) started(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lb := l.runs[id]
	lb.started = at
	l.runs[id] = lb
}

// forget drops run id (it ended).
func (l *runLabels) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.runs, id)
}

// playbookLabel is the playbook label of a run of playbook name.
func (l *runLabels) playbookLabel(name string) string {
	if l.src.known != nil && l.src.known(name) {
		return name
	}
	return otherPlaybook
}

// triggerLabel is the trigger label of run r.
func triggerLabel(r *state.Run) string {
	switch {
	case r.RetryOf != "":
		return "retry"
	case r.RerunOf() != "":
		return "rerun"
	case r.ParentID != "":
		return "playbook"
	}
	typ, _ := r.Trigger["type"].(string)
	switch {
	case typ == "":
		return "cli"
	case triggerWord().MatchString(typ):
		return typ
	}
	return "other"
}

// endStatuses are the final statuses of runbook_runs_finished_total.
var endStatuses = []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunCancelled, state.RunSkipped}

// outcomes are the label values of runbook_schedule_firings_total.
var outcomes = []trigger.Outcome{trigger.Started, trigger.Skipped, trigger.Queued, trigger.Dropped, trigger.Failed}

// loaded makes the series of every loaded playbook exist at 0 before its
// first run, so that a rule's increase() sees its first failure:
// runbook_runs_finished_total for each final status under the triggers
// that can start it (api, retry and rerun always, schedule and webhook
// when it has such a trigger), and, when this server fires schedules,
// runbook_schedule_firings_total for each of its schedule triggers and
// outcome.
func (m *metrics) loaded(pbs []*playbook.Playbook) {
	for _, pb := range pbs {
		triggers := []string{"api", "retry", "rerun"}
		var hasSchedule, hasWebhook bool
		for i, t := range pb.Triggers {
			hasWebhook = hasWebhook || t.Webhook != nil
			if t.Schedule == nil {
				continue
			}
			hasSchedule = true
			if !m.labels.src.schedules {
				continue
			}
			for _, o := range outcomes {
				m.firings.With(pb.Name, strconv.Itoa(i), string(o))
			}
		}
		if hasSchedule {
			triggers = append(triggers, "schedule")
		}
		if hasWebhook {
			triggers = append(triggers, "webhook")
		}
		for _, trig := range triggers {
			for _, st := range endStatuses {
				m.runsFinished.With(pb.Name, trig, string(st))
			}
		}
	}
}

// deliveryOutcomes are the outcomes of a delivery to a configured route.
var deliveryOutcomes = []string{"accepted", "duplicate", "400", "401", "413", "415", "500", "503"}

// routes makes runbook_webhook_deliveries_total exist at 0 for each
// outcome of each configured route, and for the 404 of an unknown route
// (labelled route=""), so that a rule's increase() sees the first
// refusal.
func (m *metrics) routes(names []string) {
	for _, r := range names {
		for _, o := range deliveryOutcomes {
			m.deliveries.With(strings.ToValidUTF8(r, "\uFFFD"), o)
		}
	}
	m.deliveries.With("", "404")
}
