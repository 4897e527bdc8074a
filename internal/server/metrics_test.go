package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// TestMetricsCarryTheRuntimeAndProcessFamilies: dashboards made for Go
// services find go_* and process_* beside runbook's own families.
func TestMetricsCarryTheRuntimeAndProcessFamilies(t *testing.T) {
	s, _ := newTestServer(t)
	body := scrape(s).String()
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
	a, _ := newTestServer(t)
	b, _ := newTestServer(t)
	a.metrics.delivery("sms", "accepted")
	assert.Contains(t, scrape(a).String(), `runbook_webhook_deliveries_total{outcome="accepted",route="sms"} 1`)
	assert.NotContains(t, scrape(b).String(), `runbook_webhook_deliveries_total{outcome="accepted",route="sms"}`)
}

// BenchmarkMetricsObserve is the cost the metrics add to every run: the
// events of a run of one step, as the engine reports them.
func BenchmarkMetricsObserve(b *testing.B) {
	m := newMetrics(func() int { return 0 }, playbookSource{playbooks: func() []*playbook.Playbook { return nil }})
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
	s, _ := newTestServer(b)
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

// newTestServer is a server over a real bbolt file with the note
// playbook, not serving.
func newTestServer(t testing.TB) (*Server, state.Store) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "note.yaml"), []byte(notePlaybook), 0o600))
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	s, err := New(Options{Engine: engine.Options{Store: store, Environ: []string{}}, Playbooks: dir})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.runs.Suspend(5 * time.Second)
		_ = store.Close()
	})
	return s, store
}

func waitRun(t *testing.T, store state.Store, id string, want state.RunStatus) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := store.GetRun(context.Background(), id)
		return err == nil && r.Status == want
	}, 5*time.Second, 5*time.Millisecond, "run %s never %s", id, want)
}

// BenchmarkPlaybookViewRead is the store read behind the per-playbook
// series (at most every storeRefresh), on each store: a history of 20,000
// finished runs of 10 playbooks, one of which never succeeded (its
// listing scans the whole history), and 200 runs waiting for an approval.
func BenchmarkPlaybookViewRead(b *testing.B) {
	b.Run("bbolt", func(b *testing.B) {
		store, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{NoSync: true})
		require.NoError(b, err)
		defer store.Close()
		benchViewRead(b, store)
	})
	b.Run("postgres", func(b *testing.B) {
		store, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
		require.NoError(b, err)
		defer store.Close()
		benchViewRead(b, store)
	})
}

func benchViewRead(b *testing.B, store state.Store) {
	ctx := context.Background()
	var pbs []*playbook.Playbook
	for i := range 10 {
		pbs = append(pbs, &playbook.Playbook{Name: "pb-" + strconv.Itoa(i)})
	}
	t0 := time.Now().Add(-time.Hour)
	for i := range 20200 {
		pb := pbs[i%10].Name
		r := &state.Run{ID: "r" + strconv.Itoa(i), Playbook: pb, Status: state.RunSucceeded, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		if pb == "pb-0" {
			r.Status = state.RunFailed
		}
		if i >= 20000 {
			r.Status = state.RunWaiting
		}
		r.EndedAt = r.CreatedAt
		require.NoError(b, store.CreateRun(ctx, r))
		if r.Status == state.RunWaiting {
			require.NoError(b, store.SaveStep(ctx, &state.StepRecord{RunID: r.ID, ID: "gate", Status: state.StepWaiting, StartedAt: r.CreatedAt, Approval: &state.ApprovalRequest{}}))
		}
	}
	v := newPlaybookView(playbookSource{store: store, playbooks: func() []*playbook.Playbook { return pbs }, known: func(string) bool { return true }})
	b.ResetTimer()
	for range b.N {
		v.at = time.Time{}
		v.refreshIfDue()
	}
	b.StopTimer()
	waiting := 0
	for _, a := range v.approvals {
		waiting += a.n
	}
	require.Equal(b, 200, waiting)
	require.True(b, v.read["pb-0"].succeeded.IsZero(), "pb-0 never succeeded")
	require.False(b, v.read["pb-1"].succeeded.IsZero())
}

// A store read that took long is made less often: ten times its duration
// apart, however often Prometheus scrapes.
func TestASlowStoreReadIsMadeLessOften(t *testing.T) {
	_, store := newTestServer(t)
	v := newPlaybookView(playbookSource{store: store, playbooks: func() []*playbook.Playbook { return nil }})
	v.took = 2 * time.Second // the last read took 2 s
	last := time.Now().Add(-15 * time.Second)
	v.at = last
	v.refreshIfDue()
	assert.Equal(t, last, v.at, "15 s after a read of 2 s: not again yet")
	v.at = time.Now().Add(-21 * time.Second)
	v.refreshIfDue()
	assert.WithinDuration(t, time.Now(), v.at, time.Second, "21 s after: read again")
}
