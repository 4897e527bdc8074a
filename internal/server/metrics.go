package server

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// metrics is the /metrics endpoint: a few families written in the
// Prometheus text exposition format (version 0.0.4). A client library
// would add a dependency for four families; these are small enough to
// write by hand.
type metrics struct {
	mu sync.Mutex

	// runs by status: counted from the store at start, then kept current
	// from the engine's events. status[id] is the last status of an
	// unfinished run (finished runs leave the map).
	runs   map[state.RunStatus]int64
	status map[string]state.RunStatus

	stepStart    map[string]time.Time  // run + "\x00" + step -> started
	stepDuration map[string]*histogram // by outcome (succeeded, failed, ...)
	deliveries   map[[2]string]int64   // route, outcome
	lateness     *histogram
	firings      map[string]int64 // outcome
	reloads      map[string]int64 // ok, failed
	// recovered counts unfinished runs this process took up again, by
	// how it found them: "returned" (its executor came back with the run
	// unfinished) or "orphaned" (the watchdog found it without one).
	recovered map[string]int64
	started   time.Time
}

// Buckets, in seconds.
var (
	stepBuckets = []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
	lateBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}
)

func newMetrics() *metrics {
	return &metrics{
		runs: map[state.RunStatus]int64{}, status: map[string]state.RunStatus{},
		stepStart: map[string]time.Time{}, stepDuration: map[string]*histogram{},
		deliveries: map[[2]string]int64{}, lateness: newHistogram(lateBuckets),
		firings: map[string]int64{}, reloads: map[string]int64{}, recovered: map[string]int64{}, started: time.Now(),
	}
}

// seed counts the runs already in the store.
func (m *metrics) seed(runs []*state.Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range runs {
		m.runs[r.Status]++
		if !r.Status.Done() {
			m.status[r.ID] = r.Status
		}
	}
}

// runStatusOf maps a run event type to the status it announces.
func runStatusOf(evType string) (state.RunStatus, bool) {
	switch evType {
	case "run.created":
		return state.RunPending, true
	case "run.started", "run.resumed":
		return state.RunRunning, true
	case "run.waiting":
		return state.RunWaiting, true
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

// observe follows the engine's events.
func (m *metrics) observe(runID string, ev state.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := runStatusOf(ev.Type); ok {
		prev, known := m.status[runID]
		if known {
			m.runs[prev]--
		}
		if known || ev.Type == "run.created" {
			m.runs[st]++
		}
		if st.Done() {
			delete(m.status, runID)
		} else if known || ev.Type == "run.created" {
			m.status[runID] = st
		}
		return
	}
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
		h := m.stepDuration[outcome]
		if h == nil {
			h = newHistogram(stepBuckets)
			m.stepDuration[outcome] = h
		}
		h.observe(ev.Time.Sub(t0).Seconds())
	}
}

func (m *metrics) delivery(route, outcome string) {
	m.mu.Lock()
	m.deliveries[[2]string{route, outcome}]++
	m.mu.Unlock()
}

func (m *metrics) firing(outcome string, late time.Duration, onTime bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.firings[outcome]++
	if onTime {
		m.lateness.observe(late.Seconds())
	}
}

// recover counts an unfinished run taken up again (see recovered).
func (m *metrics) recover(how string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovered[how]++
}

func (m *metrics) reload(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.reloads["ok"]++
	} else {
		m.reloads["failed"]++
	}
}

// write prints every family. active is the number of runs executing in
// this process; playbooks the number loaded.
func (m *metrics) write(w io.Writer, active, playbooks int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &promWriter{w: w}
	p.family("runbook_runs", "gauge", "Runs in the state store by status.")
	for _, st := range []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting, state.RunSucceeded, state.RunFailed, state.RunCancelled, state.RunSkipped} {
		p.sample("runbook_runs", labels("status", string(st)), float64(m.runs[st]))
	}
	p.family("runbook_runs_executing", "gauge", "Runs executing in this process (including waiting ones).")
	p.sample("runbook_runs_executing", "", float64(active))
	p.family("runbook_playbooks", "gauge", "Playbooks loaded.")
	p.sample("runbook_playbooks", "", float64(playbooks))

	p.family("runbook_step_duration_seconds", "histogram", "Duration of step executions, by outcome.")
	for _, outcome := range sortedKeys(m.stepDuration) {
		m.stepDuration[outcome].write(p, "runbook_step_duration_seconds", labels("outcome", outcome))
	}

	p.family("runbook_webhook_deliveries_total", "counter", "Webhook deliveries by route and outcome.")
	keys := make([][2]string, 0, len(m.deliveries))
	for k := range m.deliveries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		p.sample("runbook_webhook_deliveries_total", labels("route", k[0], "outcome", k[1]), float64(m.deliveries[k]))
	}

	p.family("runbook_schedule_firings_total", "counter", "Schedule slots handled, by outcome.")
	for _, o := range sortedKeys(m.firings) {
		p.sample("runbook_schedule_firings_total", labels("outcome", o), float64(m.firings[o]))
	}
	p.family("runbook_schedule_lateness_seconds", "histogram", "Start of an on-time scheduled run minus its intended fire time.")
	m.lateness.write(p, "runbook_schedule_lateness_seconds", "")

	p.family("runbook_reloads_total", "counter", "Playbook directory reloads, by result.")
	for _, o := range sortedKeys(m.reloads) {
		p.sample("runbook_reloads_total", labels("result", o), float64(m.reloads[o]))
	}
	p.family("runbook_runs_recovered_total", "counter", "Unfinished runs taken up again: their executor returned without finishing them, or the watchdog found them without one.")
	for _, how := range []string{"returned", "orphaned"} {
		p.sample("runbook_runs_recovered_total", labels("reason", how), float64(m.recovered[how]))
	}
	p.family("runbook_uptime_seconds", "gauge", "Seconds since the server started.")
	p.sample("runbook_uptime_seconds", "", time.Since(m.started).Seconds())
}

// histogram is a cumulative-bucket histogram.
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(p *promWriter, name, lbls string) {
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		p.sample(name+"_bucket", joinLabels(lbls, labels("le", formatFloat(b))), float64(cum))
	}
	p.sample(name+"_bucket", joinLabels(lbls, labels("le", "+Inf")), float64(h.n))
	p.sample(name+"_sum", lbls, h.sum)
	p.sample(name+"_count", lbls, float64(h.n))
}

type promWriter struct{ w io.Writer }

func (p *promWriter) family(name, typ, help string) {
	fmt.Fprintf(p.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *promWriter) sample(name, lbls string, v float64) {
	if lbls != "" {
		lbls = "{" + lbls + "}"
	}
	fmt.Fprintf(p.w, "%s%s %s\n", name, lbls, formatFloat(v))
}

// labels formats name/value pairs, escaping values as the format requires.
func labels(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(kv[i+1]))
		b.WriteByte('"')
	}
	return b.String()
}

func joinLabels(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
