package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

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
