package engine_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// BenchmarkWaitingRuns holds N one-step runs waiting at once in one
// process, over a real, fsynced bbolt file, as the server does: Start and
// Execute each, measure memory once all wait, cancel them all, open the
// file again with a new engine and Resume every run, measuring the time
// until all wait again and the memory then. The targets are 10,000 runs
// under 300 MB RSS, all waiting again within 5 s of the restart.
//
// One op is the whole scenario (use -benchtime=1x). N is 10,000, or
// RUNBOOK_BENCH_WAITING_RUNS. Metrics: heap_MB and rss_MB while waiting
// (Go's HeapInuse and /proc/self/status VmRSS), start_s, resume_s and
// resumed_heap_MB, goroutines/run.
//
//	go test ./internal/engine -run '^$' -bench WaitingRuns -benchtime=1x
func BenchmarkWaitingRuns(b *testing.B) {
	b.Run("approval", func(b *testing.B) {
		benchWaiting(b, `{id: gate, uses: approval, with: {message: "go?"}}`, "approval.requested")
	})
	b.Run("sleep", func(b *testing.B) {
		benchWaiting(b, `{id: gate, uses: sleep, with: {duration: 1h}}`, "step.started")
	})
}

func benchWaiting(b *testing.B, step, waitingEvent string) {
	n := 10000
	if s := os.Getenv("RUNBOOK_BENCH_WAITING_RUNS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("RUNBOOK_BENCH_WAITING_RUNS: %v", err)
		}
	}
	src := "version: 1\nname: waiting\ninputs:\n  ticket: {type: string, default: OPS-1}\nsteps:\n  - " + step + "\n"
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "state.db")
		parse := cachingParse()
		pb, err := parse("waiting.yaml", []byte(src))
		if err != nil {
			b.Fatal(err)
		}

		// Phase 1: start and execute n runs until each one waits.
		st, waiting, e := openWaiting(b, path, parse, waitingEvent)
		base := goroutines()
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		ids := make([]string, n)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.Start(ctx, pb, engine.StartRequest{})
				if err != nil {
					b.Log(err)
					failed.Add(1)
					return
				}
				ids[i] = r.ID
				_, _ = e.Execute(ctx, pb, r)
			}()
		}
		waiting.wait(b, n, &failed, 120*time.Second)
		start := time.Since(t0)
		heap, rss := memory()
		stack, anon := stackMB(), statusMB("RssAnon:")
		perRun := float64(goroutines()-base) / float64(n)

		cancel()
		wg.Wait()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}

		// Phase 2: a new engine over the same file resumes every run.
		runtime.GC()
		debug.FreeOSMemory()
		st, waiting, e = openWaiting(b, path, parse, waitingEvent)
		ctx, cancel = context.WithCancel(context.Background())
		t0 = time.Now()
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.Resume(ctx, id); err != nil && ctx.Err() == nil {
					b.Log(err)
					failed.Add(1)
				}
			}()
		}
		waiting.wait(b, n, &failed, 120*time.Second)
		resume := time.Since(t0)
		rheap, rrss := memory()
		cancel()
		wg.Wait()
		_ = st.Close()

		b.ReportMetric(float64(n), "runs")
		b.ReportMetric(heap, "heap_MB")
		b.ReportMetric(rss, "rss_MB")
		b.ReportMetric(perRun, "goroutines/run")
		b.ReportMetric(stack, "stack_MB")
		b.ReportMetric(anon, "rss_anon_MB")
		b.ReportMetric(start.Seconds(), "start_s")
		b.ReportMetric(resume.Seconds(), "resume_s")
		b.ReportMetric(rheap, "resumed_heap_MB")
		b.ReportMetric(rrss, "resumed_rss_MB")
	}
}

// waitCounter counts runs that reached their waiting event.
type waitCounter struct {
	event string
	n     atomic.Int64
}

func (w *waitCounter) wait(b *testing.B, n int, failed *atomic.Int64, limit time.Duration) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for int(w.n.Load()) < n {
		if f := failed.Load(); f > 0 {
			b.Fatalf("%d runs failed to start or resume", f)
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d runs waiting after %s", w.n.Load(), n, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func openWaiting(b *testing.B, path string, parse func(string, []byte) (*playbook.Playbook, error), event string) (*bolt.Store, *waitCounter, *engine.Engine) {
	b.Helper()
	st, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	w := &waitCounter{event: event}
	e := engine.New(engine.Options{
		Store: st, Environ: []string{}, Parse: parse,
		Approvals: engine.ApprovalWait, ApprovalPoll: time.Hour,
		Observer: func(_ string, ev state.Event) {
			if ev.Type == w.event {
				w.n.Add(1)
			}
		},
	})
	return st, w, e
}

// cachingParse is the Parse a server passes: one parsed playbook per
// snapshot, shared by every run of it.
func cachingParse() func(string, []byte) (*playbook.Playbook, error) {
	var cache sync.Map // [32]byte -> *playbook.Playbook
	return func(file string, src []byte) (*playbook.Playbook, error) {
		key := sha256.Sum256(src)
		if pb, ok := cache.Load(key); ok {
			return pb.(*playbook.Playbook), nil
		}
		pb, err := playbook.Parse(file, src, playbook.LoadOptions{})
		if err != nil {
			return nil, err
		}
		got, _ := cache.LoadOrStore(key, pb)
		return got.(*playbook.Playbook), nil
	}
}

func goroutines() int { return runtime.NumGoroutine() }

// memory returns Go's heap in use and the process's resident set, in MB,
// after two collections (each may halve a goroutine stack that is mostly
// unused; a server collects many times while its runs wait).
func memory() (heap, rss float64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / 1e6, statusMB("VmRSS:")
}

func stackMB() float64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.StackInuse) / 1e6
}

// statusMB reads one kB field of /proc/self/status, in MB.
func statusMB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1e3
		}
	}
	return 0
}
