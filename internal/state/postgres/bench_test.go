package postgres_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// The benchmarks run each workload on both stores, durable as deployed:
// bbolt with fsync, PostgreSQL with fsync and synchronous_commit on (the
// test server's defaults), over loopback TCP. They read as the bbolt
// store's own benchmarks (internal/state/bolt) do, so the figures compare.

// benchStores lists the stores a benchmark runs on.
var benchStores = []struct {
	name string
	open func(b *testing.B) state.Store
}{
	{"bolt", func(b *testing.B) state.Store {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) state.Store { return open(b, pgtest.DB(b), postgres.Options{}) }},
}

func eachStore(b *testing.B, fn func(b *testing.B, s state.Store)) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) { fn(b, st.open(b)) })
	}
}

func benchRun(id string) *state.Run {
	return &state.Run{ID: id, Playbook: "upgrade", Status: state.RunPending, Hash: "h1", Snapshot: make([]byte, 8<<10),
		Inputs: map[string]any{"cluster": "c1"}, Trigger: map[string]any{"type": "api"}}
}

// BenchmarkCreateRun creates a run with one event (its 8 KiB snapshot
// shared with the others by hash).
func BenchmarkCreateRun(b *testing.B) {
	eachStore(b, func(b *testing.B, s state.Store) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if err := s.CreateRun(ctx, benchRun(fmt.Sprint("r", i)), state.Event{Type: "run.created"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSaveRun saves a run's new status with one event, as the engine
// does when a run starts or ends.
func BenchmarkSaveRun(b *testing.B) {
	eachStore(b, func(b *testing.B, s state.Store) {
		r := benchRun("r1")
		if err := s.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			r.Status = []state.RunStatus{state.RunRunning, state.RunWaiting}[i%2]
			if err := s.SaveRun(ctx, r, state.Event{Type: "run." + string(r.Status)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSaveStep measures one step as the engine writes it: a running
// and a succeeded SaveStep, each with one event (bolt's BenchmarkSaveStep).
// The nosync cases show what the flush to disk costs (they are not
// configurations): bbolt without fsync, PostgreSQL with
// synchronous_commit off (the commit does not wait for its WAL flush).
func BenchmarkSaveStep(b *testing.B) {
	run := func(b *testing.B, s state.Store) {
		if err := s.CreateRun(ctx, benchRun("r1")); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			id := fmt.Sprintf("step-%d", i)
			rec := &state.StepRecord{RunID: "r1", ID: id, Status: state.StepRunning, Attempts: 1, StartedAt: now}
			if err := s.SaveStep(ctx, rec, state.Event{Time: now, Type: "step.started", Step: id, Attempt: 1}); err != nil {
				b.Fatal(err)
			}
			rec.Status = state.StepSucceeded
			rec.EndedAt = now
			rec.Outputs = map[string]any{"id": "5f0c", "status": "ACTIVE"}
			if err := s.SaveStep(ctx, rec, state.Event{Time: now, Type: "step.succeeded", Step: id, Attempt: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/SaveStep")
	}
	eachStore(b, run)
	b.Run("bolt-nosync", func(b *testing.B) {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		run(b, s)
	})
	b.Run("postgres-nosync", func(b *testing.B) {
		run(b, open(b, pgtest.DB(b)+"&synchronous_commit=off", postgres.Options{}))
	})
}

// BenchmarkAppendEvents appends one log event (bolt's
// BenchmarkAppendEvents).
func BenchmarkAppendEvents(b *testing.B) {
	eachStore(b, func(b *testing.B, s state.Store) {
		if err := s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}); err != nil {
			b.Fatal(err)
		}
		ev := state.Event{Time: time.Now(), Type: "log", Step: "a", Level: "info", Message: "cluster c1 is PROVISIONING"}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.AppendEvents(ctx, "r1", ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCommitDelivery commits a new webhook delivery of two hooks:
// its key, two hook claims with values, two runs with one event each and
// the done value.
func BenchmarkCommitDelivery(b *testing.B) {
	eachStore(b, func(b *testing.B, s state.Store) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			d := hookDelivery(fmt.Sprint("webhook/gh/", i), fmt.Sprint("run-", i, "-"), fmt.Sprint(i, "-a"), fmt.Sprint(i, "-b"))
			res, err := s.CommitDelivery(ctx, d)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Created) != 2 {
				b.Fatalf("created %v", res.Created)
			}
		}
	})
}

// BenchmarkListRuns lists the 50 newest of 2000 runs, with and without a
// filter that matches one run in four (bolt's BenchmarkListRuns), and a
// page of 50 after a cursor 1,500 runs deep (keyset paging: it should
// cost what the first page does).
func BenchmarkListRuns(b *testing.B) {
	eachStore(b, func(b *testing.B, s state.Store) {
		base := time.Now()
		statuses := []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunRunning, state.RunCancelled}
		for i := range 2000 {
			r := &state.Run{
				ID: fmt.Sprintf("run-%05d", i), Playbook: fmt.Sprintf("pb-%d", i%3),
				Status: statuses[i%4], CreatedAt: base.Add(time.Duration(i) * time.Second),
				Snapshot: make([]byte, 2<<10), Inputs: map[string]any{"cluster": "c1"},
			}
			if err := s.CreateRun(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		for _, bc := range []struct {
			name   string
			filter state.RunFilter
		}{
			{"newest50", state.RunFilter{Limit: 50}},
			{"failed50", state.RunFilter{Status: []state.RunStatus{state.RunFailed}, Limit: 50}},
			{"all2000", state.RunFilter{}},
			{"page-1500-deep", state.RunFilter{Limit: 50, Before: &state.RunCursor{
				CreatedAt: base.Add(500 * time.Second), ID: "run-00500"}}},
		} {
			b.Run(bc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.ListRuns(ctx, bc.filter); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}

// BenchmarkConcurrentCommits measures durable writes from 32 concurrent
// callers (Dedup of distinct keys), as bolt's BenchmarkConcurrentCommits:
// bbolt's group committer shares an fsync among them; PostgreSQL's
// backends share WAL flushes, as many at once as the pool has
// connections (the store's default, DefaultMaxConns: 16 on two CPUs;
// "postgres-pool32" has one per caller).
func BenchmarkConcurrentCommits(b *testing.B) {
	run := func(b *testing.B, s state.Store) {
		const callers = 32
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						return
					}
					if _, err := s.Dedup(ctx, fmt.Sprintf("key-%d-%d", b.N, i), time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	}
	eachStore(b, run)
	b.Run("postgres-pool32", func(b *testing.B) { run(b, open(b, pgtest.DB(b), postgres.Options{MaxConns: 32})) })
}

// BenchmarkQueuePollBesideWaitingRuns is a replica's poll of the queue
// (ClaimRuns) that finds nothing to take beside 20,000 runs waiting for
// another replica, alive (approvals, say): what each replica pays every
// second for them.
func BenchmarkQueuePollBesideWaitingRuns(b *testing.B) {
	dsn := pgtest.DB(b)
	s := open(b, dsn, postgres.Options{})
	if err := s.KeepReplica(ctx, "host/live", state.ReplicaServe, time.Hour); err != nil {
		b.Fatal(err)
	}
	if _, err := connect(b, dsn).Exec(ctx, `INSERT INTO runbook_runs (id, playbook, status, owner, created_ns, created_at, record)
		SELECT 'waiting-' || lpad(g::text, 6, '0'), 'pb', 'waiting', 'host/live', g, now() - interval '1 hour', '{}'
		FROM generate_series(1, 20000) g`); err != nil {
		b.Fatal(err)
	}
	if _, err := connect(b, dsn).Exec(ctx, `ANALYZE runbook_runs`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ids, err := s.ClaimRuns(ctx, "host/poller", 16, time.Second, false)
		if err != nil || len(ids) > 0 {
			b.Fatal(ids, err)
		}
	}
}
