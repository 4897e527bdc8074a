package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/state"
)

// TestMetricsCarryTheRuntimeAndProcessFamilies: dashboards made for Go
// services find go_* and process_* beside runbook's own families.
func TestMetricsCarryTheRuntimeAndProcessFamilies(t *testing.T) {
	r, _ := newTestRunner(t)
	body := scrape(r.s).String()
	for _, want := range []string{
		"# TYPE go_goroutines gauge", "# TYPE go_gc_duration_seconds summary", "# TYPE go_memstats_heap_alloc_bytes gauge",
		"# TYPE process_resident_memory_bytes gauge", "# TYPE process_open_fds gauge",
		"# TYPE runbook_uptime_seconds gauge", `runbook_runs{status="pending"} 0`,
	} {
		assert.Contains(t, body, want)
	}
}

// TestTwoServersCountApart: each server has its own registry, so two in
// one process (tests, an embedding program) neither collide nor share
// counts.
func TestTwoServersCountApart(t *testing.T) {
	a, _ := newTestRunner(t)
	b, _ := newTestRunner(t)
	a.s.metrics.delivery("sms", "accepted")
	assert.Contains(t, scrape(a.s).String(), `runbook_webhook_deliveries_total{outcome="accepted",route="sms"} 1`)
	assert.NotContains(t, scrape(b.s).String(), "runbook_webhook_deliveries_total")
}

// BenchmarkMetricsObserve is the cost the metrics add to every run: the
// events of a run of one step, as the engine reports them.
func BenchmarkMetricsObserve(b *testing.B) {
	m := newMetrics(func() int { return 0 }, func() int { return 1 })
	t0 := time.Now()
	evs := []state.Event{
		{Type: "run.created", Time: t0},
		{Type: "run.started", Time: t0},
		{Type: "step.started", Step: "a", Time: t0},
		{Type: "step.log", Step: "a", Time: t0},
		{Type: "step.succeeded", Step: "a", Time: t0.Add(time.Millisecond)},
		{Type: "run.succeeded", Time: t0.Add(time.Millisecond)},
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := strconv.Itoa(i)
		for _, ev := range evs {
			m.observe(id, ev)
		}
	}
}

// BenchmarkMetricsScrape is one GET /metrics of a server that has seen
// deliveries on a few routes and steps of every outcome.
func BenchmarkMetricsScrape(b *testing.B) {
	r, _ := newTestRunner(b)
	s := r.s
	t0 := time.Now()
	for i := range 100 {
		id := strconv.Itoa(i)
		s.metrics.observe(id, state.Event{Type: "run.created", Time: t0})
		s.metrics.observe(id, state.Event{Type: "step.started", Step: "a", Time: t0})
		outcome := []string{"succeeded", "failed", "cancelled"}[i%3]
		s.metrics.observe(id, state.Event{Type: "step." + outcome, Step: "a", Time: t0.Add(time.Duration(i) * time.Millisecond)})
		s.metrics.delivery("route-"+strconv.Itoa(i%4), []string{"accepted", "duplicate", "401"}[i%3])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		scrape(s)
	}
}

// scrape is the body of GET /metrics.
func scrape(s *Server) *bytes.Buffer {
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body
}
