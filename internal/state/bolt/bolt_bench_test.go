package bolt_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func benchStore(b *testing.B, opts bolt.Options) *bolt.Store {
	b.Helper()
	s, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkSaveStep measures one step as the engine writes it: a running
// and a succeeded SaveStep, each with one event, on a real file with fsync
// (the NoSync case shows what the fsync costs; it is not a configuration).
func BenchmarkSaveStep(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts bolt.Options
	}{
		{"fsync", bolt.Options{}},
		{"nosync", bolt.Options{NoSync: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchStore(b, bc.opts)
			r := &state.Run{ID: "r1", Playbook: "pb", Status: state.RunRunning, Snapshot: make([]byte, 8<<10)}
			if err := s.CreateRun(ctx, r); err != nil {
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
		})
	}
}

// BenchmarkAppendEvents measures one AppendEvents call with one log event,
// on a real file with fsync.
func BenchmarkAppendEvents(b *testing.B) {
	s := benchStore(b, bolt.Options{})
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
}

// BenchmarkListRuns lists the 50 newest of 2000 runs, with and without a
// filter that matches one run in four.
func BenchmarkListRuns(b *testing.B) {
	s := benchStore(b, bolt.Options{NoSync: true}) // only the setup writes
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
}

// BenchmarkConcurrentCommits measures durable writes from 32 concurrent
// callers (Dedup of distinct keys, fsynced file): the group committer lets
// them share commits, so the figure is well above one fsync per write.
func BenchmarkConcurrentCommits(b *testing.B) {
	s := benchStore(b, bolt.Options{})
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
