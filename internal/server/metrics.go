package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/metric"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// metrics is the /metrics endpoint: runbook's families (docs/api.md) and
// the Go runtime's and the process's, in a registry of the server's own,
// so that two servers in one process (tests) count apart.
type metrics struct {
	handler http.Handler

	runs map[state.RunStatus]*metric.Gauge // runbook_runs by status
	// runsFinished, runDuration and stepDuration carry the playbook and
	// trigger labels of metrics_runs.go; firings the schedule trigger's.
	runsFinished *metric.CounterVec
	runDuration  *metric.HistogramVec
	stepDuration *metric.HistogramVec
	deliveries   *metric.CounterVec
	firings      *metric.CounterVec
	lateness     *metric.Histogram
	// dispatch is the agents' dispatch latency (agent.Options.Dispatched).
	dispatch *metric.Histogram
	reloads  *metric.CounterVec
	// recovered counts unfinished runs this process took up again, by
	// how it found them: "returned" (its executor came back with the run
	// unfinished) or "orphaned" (the watchdog found it without one).
	recovered *metric.CounterVec
	// fenced counts runs stopped here because this replica may no longer
	// write them, by reason: "refused" (the store refused a write: another
	// replica owns the run now) or "lease" (the replica's lease was not
	// renewed in time; see internal/runner/replica.go).
	fenced *metric.CounterVec
	// queued is read at each scrape: the runs waiting for an execution
	// slot (set by the server once its runner exists).
	queued func() int
	// parked is read at each scrape: the runs parked (internal/runner/park.go).
	parked func() int
	// unfinished is the database's runs in flight, on replicas
	// (metrics_cluster.go).
	unfinished *unfinishedRuns
	// labels gives a run's playbook and trigger labels; playbooks is the
	// per-playbook view (metrics_playbooks.go).
	labels    *runLabels
	playbooks *playbookView

	// The runs gauge is counted from the store at start, then kept current
	// from the engine's events: status[id] is the last status of an
	// unfinished run (finished runs leave the map). stepStart is when each
	// executing step (run + "\x00" + step) started.
	mu        sync.Mutex
	status    map[string]state.RunStatus
	stepStart map[string]time.Time
}

// Buckets, in seconds.
var (
	stepBuckets = []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
	runBuckets  = []float64{1, 10, 60, 300, 900, 1800, 3600, 2 * 3600, 6 * 3600, 24 * 3600}
	lateBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}
	// dispatchBuckets resolve the ≤ 25 ms docs/agents.md states.
	dispatchBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// runStatuses are the label values of runbook_runs, each always shown.
var runStatuses = []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting, state.RunSuspended, state.RunSucceeded, state.RunFailed, state.RunCancelled, state.RunSkipped}

// newMetrics registers every family. executing is read at each scrape:
// the runs executing in this process; src is what the per-playbook series
// read (the store and the loaded playbooks).
func newMetrics(executing func() int, src playbookSource) *metrics {
	started := time.Now()
	lateness := metric.NewHistogramVec("runbook_schedule_lateness_seconds",
		"Start of an on-time scheduled run minus its intended fire time.", lateBuckets)
	dispatch := metric.NewHistogramVec("runbook_agent_dispatch_seconds",
		"Attempts of the runs executing here that ran on an agent: from the placement of each on its agent to its start there (by the agent's clock).", dispatchBuckets)
	m := &metrics{
		runs: map[state.RunStatus]*metric.Gauge{},
		runsFinished: metric.NewCounterVec("runbook_runs_finished_total",
			"Runs that ended here, by playbook, trigger and final status.", "playbook", "trigger", "status"),
		runDuration: metric.NewHistogramVec("runbook_run_duration_seconds",
			"Duration of runs that ended here, from their start (their creation when they never started) to their end, by playbook, trigger and final status.",
			runBuckets, "playbook", "trigger", "status"),
		stepDuration: metric.NewHistogramVec("runbook_step_duration_seconds",
			"Duration of step executions, by playbook, trigger and outcome.", stepBuckets, "playbook", "trigger", "outcome"),
		deliveries: metric.NewCounterVec("runbook_webhook_deliveries_total", "Webhook deliveries by route and outcome.", "route", "outcome"),
		firings: metric.NewCounterVec("runbook_schedule_firings_total",
			"Schedule slots handled, by playbook, trigger (its index among the playbook's triggers) and outcome.", "playbook", "trigger", "outcome"),
		lateness: lateness.With(),
		dispatch: dispatch.With(),
		reloads:  metric.NewCounterVec("runbook_reloads_total", "Playbook directory reloads, by result.", "result"),
		recovered: metric.NewCounterVec("runbook_runs_recovered_total",
			"Unfinished runs taken up again: their executor returned without finishing them, or the watchdog found them without one.", "reason"),
		fenced: metric.NewCounterVec("runbook_runs_fenced_total",
			"Runs stopped without writing because this replica may no longer write them: the store refused a write (another replica owns the run), or the replica's lease was not renewed in time.", "reason"),
		status:     map[string]state.RunStatus{},
		stepStart:  map[string]time.Time{},
		unfinished: newUnfinishedRuns(),
		labels:     newRunLabels(src),
		playbooks:  newPlaybookView(src),
	}
	_, replicas := src.store.(state.Coordinator)
	if sr, ok := src.store.(state.StatusReader); ok && replicas {
		m.playbooks.reconcile = func(ctx context.Context) error { return m.reconcile(ctx, sr) }
	}
	runs := metric.NewGaugeVec("runbook_runs",
		"Runs in the state store by status; on replicas, the runs created through this replica since it started (see runbook_runs_unfinished).", "status")
	for _, st := range runStatuses {
		m.runs[st] = runs.With(string(st))
	}
	for _, how := range []string{"returned", "orphaned"} {
		m.recovered.With(how)
	}
	for _, why := range []string{"refused", "lease"} {
		m.fenced.With(why)
	}
	reg := metric.NewRegistry()
	reg.Register(
		metric.RuntimeCollector(),
		metric.ProcessCollector(),
		runs, m.runsFinished, m.runDuration, m.stepDuration, m.deliveries, m.firings, lateness, dispatch, m.reloads, m.recovered, m.unfinished, m.fenced, m.playbooks,
		metric.NewGaugeFunc("runbook_runs_executing", "Runs executing in this process (including waiting ones).",
			func() float64 { return float64(executing()) }),
		metric.NewGaugeFunc("runbook_runs_queued", "Runs accepted and waiting for an execution slot (server.max_running).",
			func() float64 {
				if m.queued == nil {
					return 0
				}
				return float64(m.queued())
			}),
		metric.NewGaugeFunc("runbook_runs_parked", "Runs waiting (an approval, a sleep, a task's next poll) without a goroutine, until due or answered.",
			func() float64 {
				if m.parked == nil {
					return 0
				}
				return float64(m.parked())
			}),
		metric.NewGaugeFunc("runbook_playbooks", "Playbooks loaded.",
			func() float64 { return float64(len(src.playbooks())) }),
		metric.NewGaugeFunc("runbook_uptime_seconds", "Seconds since the server started.",
			func() float64 { return time.Since(started).Seconds() }),
	)
	inner := reg.Handler()
	// The store is read before the families are collected, so that
	// runbook_runs shows what a replica's read corrects.
	m.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.playbooks.refreshIfDue()
		inner.ServeHTTP(w, r)
	})
	return m
}

// seed counts the runs already in the store.
func (m *metrics) Seed(runs []*state.Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range runs {
		m.addRuns(r.Status, 1)
		if !r.Status.Done() {
			m.status[r.ID] = r.Status
		}
	}
}

// addRuns moves the runbook_runs gauge of status st by n.
func (m *metrics) addRuns(st state.RunStatus, n float64) {
	if g, ok := m.runs[st]; ok {
		g.Add(n)
	}
}

// runStatusOf maps a run event type to the status it announces.
func runStatusOf(evType string) (state.RunStatus, bool) {
	switch evType {
	case "run.created":
		return state.RunPending, true
	case "run.started", "run.resumed":
		return state.RunRunning, true
	case "run.waiting", "run.queued": // run.queued: parked on its concurrency key (internal/runner/keys.go)
		return state.RunWaiting, true
	case "run.suspended":
		return state.RunSuspended, true
	case "run.succeeded":
		return state.RunSucceeded, true
	case "run.failed":
		return state.RunFailed, true
	case "run.cancelled":
		return state.RunCancelled, true
	case "run.skipped":
		return state.RunSkipped, true
	}
	return "", false
}

// Launched notes the labels of a run launched here (runner.Metrics).
func (m *metrics) Launched(r *state.Run) { m.labels.note(r) }

// observe follows the engine's events. A run's end and a step's end are
// counted under the run's playbook and trigger: noted when the run was
// launched here, else read from the store once per run (outside the
// lock). It returns the labels of a run's end (resolved false for any
// other event).
func (m *metrics) observe(runID string, ev state.Event) runLabel {
	st, isRun := runStatusOf(ev.Type)
	var lb runLabel
	if isRun && st.Done() || isStepEnd(ev) {
		lb = m.labels.of(runID)
	}
	if !isRun {
		m.stepEvent(runID, ev, lb)
		return runLabel{}
	}
	m.mu.Lock()
	m.runStatus(runID, ev, st)
	if st.Done() {
		m.runEnded(runID, lb, st, ev.Time)
	} else if ev.Type == "run.started" {
		m.labels.started(runID, ev.Time)
	}
	m.mu.Unlock()
	if st.Done() {
		m.playbooks.ended(lb.playbook, st, ev.Time)
	}
	return lb
}

// stepEvent times a step from its start to its end, under the labels lb
// of its run.
func (m *metrics) stepEvent(runID string, ev state.Event, lb runLabel) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Step == "" || !strings.HasPrefix(ev.Type, "step.") {
		return
	}
	key := runID + "\x00" + ev.Step
	switch ev.Type {
	case "step.started":
		m.stepStart[key] = ev.Time
	case "step.succeeded", "step.failed", "step.cancelled":
		t0, ok := m.stepStart[key]
		if !ok {
			return
		}
		delete(m.stepStart, key)
		outcome := strings.TrimPrefix(ev.Type, "step.")
		m.stepDuration.With(lb.playbook, lb.trigger, outcome).Observe(ev.Time.Sub(t0).Seconds())
	}
}

// isStepEnd reports whether ev ends a step's execution.
func isStepEnd(ev state.Event) bool {
	return ev.Step != "" && (ev.Type == "step.succeeded" || ev.Type == "step.failed" || ev.Type == "step.cancelled")
}

// runStatus moves the runbook_runs gauge for a run event announcing st.
func (m *metrics) runStatus(runID string, ev state.Event, st state.RunStatus) {
	prev, known := m.status[runID]
	if known {
		m.addRuns(prev, -1)
	}
	if known || ev.Type == "run.created" {
		m.addRuns(st, 1)
	}
	if st.Done() {
		delete(m.status, runID)
	} else if known || ev.Type == "run.created" {
		m.status[runID] = st
	}
}

// runEnded counts a run's end under its labels.
func (m *metrics) runEnded(runID string, lb runLabel, st state.RunStatus, at time.Time) {
	m.runsFinished.With(lb.playbook, lb.trigger, string(st)).Inc()
	from := lb.started
	if from.IsZero() {
		from = lb.created
	}
	if !from.IsZero() && !at.Before(from) {
		m.runDuration.With(lb.playbook, lb.trigger, string(st)).Observe(at.Sub(from).Seconds())
	}
	m.labels.forget(runID)
}

func (m *metrics) delivery(route, outcome string) {
	// A label value must be UTF-8; a route name from YAML is.
	m.deliveries.With(strings.ToValidUTF8(route, "\uFFFD"), outcome).Inc()
}

func (m *metrics) firing(f trigger.Firing) {
	m.firings.With(m.labels.playbookLabel(f.Playbook), strconv.Itoa(f.Trigger), string(f.Outcome)).Inc()
	if f.Outcome == trigger.Started && !f.Catchup {
		m.lateness.Observe(f.Late.Seconds())
	}
}

// Fenced counts a run stopped without writing (see fenced).
func (m *metrics) Fenced(why string) {
	m.fenced.With(why).Inc()
}

// Recovered counts an unfinished run taken up again (see recovered).
func (m *metrics) Recovered(how string) {
	m.recovered.With(how).Inc()
}

func (m *metrics) reload(ok bool) {
	if ok {
		m.reloads.With("ok").Inc()
	} else {
		m.reloads.With("failed").Inc()
	}
}
