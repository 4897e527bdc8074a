package engine_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
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
// Execute each ("sleep": a one-hour sleep step, no ParkAfter, so each
// waits in its goroutine; a caching Parse), measure memory once all wait,
// cancel them all; then a new process of this test binary (resumeChild,
// run by TestMain) opens the file and Resumes every run, measuring the
// time until all wait again and its memory then. The targets are 10,000
// runs under 300 MB RSS, all waiting again within 5 s of the restart.
//
// "approval-parked" and "sleep-parked" run the same under
// a ParkAfter of 2 s, as runbook serve does: Execute returns once the run
// is parked (run.waiting) and nothing holds it; the restarted process does
// what serve's start does with parked runs: it lists the waiting runs
// with their wake times (resume_s), executing none.
//
// One op is the whole scenario (use -benchtime=1x). N is 10,000, or
// RUNBOOK_BENCH_WAITING_RUNS. Memory is read after two collections: Go's
// HeapInuse (heap_MB), goroutine stacks (stack_MB), /proc/self/status
// VmRSS (rss_MB, which includes the bbolt file's mapped pages), RssAnon,
// VmRSS once freed memory is returned to the OS (rss_settled_MB) and the
// peak VmHWM (rss_peak_MB). "step.waiting" (approval) is observed after
// its write commits, so resume_s counts the writes.
//
//	go test ./internal/engine -run '^$' -bench WaitingRuns -benchtime=1x
func BenchmarkWaitingRuns(b *testing.B) {
	b.Run("sleep", func(b *testing.B) {
		benchWaiting(b, `{id: gate, uses: sleep, with: {duration: 1h}}`, "step.started", 0)
	})
	b.Run("approval-parked", func(b *testing.B) {
		benchWaiting(b, `{id: gate, uses: approval, with: {message: "go?"}}`, "run.waiting", 2*time.Second)
	})
	b.Run("sleep-parked", func(b *testing.B) {
		benchWaiting(b, `{id: gate, uses: sleep, with: {duration: 1h}}`, "run.waiting", 2*time.Second)
	})
}

func benchWaiting(b *testing.B, step, waitingEvent string, parkAfter time.Duration) {
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
		st, waiting, e := openWaiting(b, path, parse, waitingEvent, parkAfter)
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
		settled, peak := settledRSS(), statusMB("VmHWM:")
		perRun := float64(goroutines()-base) / float64(n)

		cancel()
		wg.Wait()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}

		// Phase 2: a new process (as after a restart) opens the same file
		// and resumes every run.
		res := resumeInChild(b, path, waitingEvent, ids, parkAfter)

		b.ReportMetric(float64(n), "runs")
		b.ReportMetric(heap, "heap_MB")
		b.ReportMetric(rss, "rss_MB")
		b.ReportMetric(perRun, "goroutines/run")
		b.ReportMetric(stack, "stack_MB")
		b.ReportMetric(anon, "rss_anon_MB")
		b.ReportMetric(settled, "rss_settled_MB")
		b.ReportMetric(peak, "rss_peak_MB")
		b.ReportMetric(start.Seconds(), "start_s")
		b.ReportMetric(res["resume_s"], "resume_s")
		b.ReportMetric(res["heap_MB"], "resumed_heap_MB")
		b.ReportMetric(res["rss_MB"], "resumed_rss_MB")
		b.ReportMetric(res["stack_MB"], "resumed_stack_MB")
		b.ReportMetric(res["rss_anon_MB"], "resumed_rss_anon_MB")
		b.ReportMetric(res["rss_settled_MB"], "resumed_rss_settled_MB")
		b.ReportMetric(res["rss_peak_MB"], "resumed_rss_peak_MB")
	}
}

// resumeInChild runs resumeChild in a new process of this test binary and returns the figures it prints.
func resumeInChild(b *testing.B, path, event string, ids []string, parkAfter time.Duration) map[string]float64 {
	b.Helper()
	idFile := path + ".ids"
	if err := os.WriteFile(idFile, []byte(strings.Join(ids, "\n")), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RUNBOOK_BENCH_RESUME_DB="+path, "RUNBOOK_BENCH_RESUME_IDS="+idFile, "RUNBOOK_BENCH_RESUME_EVENT="+event, "RUNBOOK_BENCH_RESUME_PARK_AFTER="+parkAfter.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("resume process: %v\n%s", err, out)
	}
	res := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "resumed:"); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				res[k], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if len(res) == 0 {
		b.Fatalf("resume process printed no figures:\n%s", out)
	}
	return res
}

// fataler is what the waiting helpers need of a test or benchmark, and
// what the resume child (run outside any test) gives them.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// childFatal ends the resume child with a message.
type childFatal struct{}

func (childFatal) Helper() {}
func (childFatal) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}
func (childFatal) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// resumeChild is the restarted process of BenchmarkWaitingRuns, run by
// TestMain when RUNBOOK_BENCH_RESUME_DB is set: it resumes the waiting
// runs and prints its figures.
func resumeChild(path string) {
	var t childFatal
	raw, err := os.ReadFile(os.Getenv("RUNBOOK_BENCH_RESUME_IDS"))
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Split(string(raw), "\n")
	if parkAfter, _ := time.ParseDuration(os.Getenv("RUNBOOK_BENCH_RESUME_PARK_AFTER")); parkAfter > 0 {
		listParked(t, path, len(ids))
		return
	}
	st, waiting, e := openWaiting(t, path, cachingParse(), os.Getenv("RUNBOOK_BENCH_RESUME_EVENT"), 0)
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failed atomic.Int64
	t0 := time.Now()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Resume(ctx, id); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, err)
				failed.Add(1)
			}
		}()
	}
	waiting.wait(t, len(ids), &failed, 120*time.Second)
	resume := time.Since(t0)
	heap, rss := memory()
	stack, anon := stackMB(), statusMB("RssAnon:")
	settled, peak := settledRSS(), statusMB("VmHWM:")
	fmt.Printf("resumed: resume_s=%.3f heap_MB=%.1f rss_MB=%.1f stack_MB=%.1f rss_anon_MB=%.1f rss_settled_MB=%.1f rss_peak_MB=%.1f\n",
		resume.Seconds(), heap, rss, stack, anon, settled, peak)
	cancel()
	wg.Wait()
}

// listParked is the restart of parked runs: what serve's start reads of
// them (the unfinished runs, each with its wake time), holding them as its
// runner does (an ID and a wake time each), executing none.
func listParked(t childFatal, path string, n int) {
	t0 := time.Now()
	st, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), state.RunFilter{Status: []state.RunStatus{state.RunWaiting}})
	if err != nil {
		t.Fatal(err)
	}
	parked := make(map[string]time.Time, len(runs))
	for _, r := range runs {
		parked[r.ID] = r.WakeAt
	}
	runs = nil
	resume := time.Since(t0)
	if len(parked) != n {
		t.Fatalf("%d runs waiting after the restart, want %d", len(parked), n)
	}
	heap, rss := memory()
	stack, anon := stackMB(), statusMB("RssAnon:")
	settled, peak := settledRSS(), statusMB("VmHWM:")
	fmt.Printf("resumed: resume_s=%.3f heap_MB=%.1f rss_MB=%.1f stack_MB=%.1f rss_anon_MB=%.1f rss_settled_MB=%.1f rss_peak_MB=%.1f\n",
		resume.Seconds(), heap, rss, stack, anon, settled, peak)
	runtime.KeepAlive(parked)
}

// waitCounter counts runs that reached their waiting event.
type waitCounter struct {
	event string
	n     atomic.Int64
}

func (w *waitCounter) wait(b fataler, n int, failed *atomic.Int64, limit time.Duration) {
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

func openWaiting(b fataler, path string, parse func(string, []byte) (*playbook.Playbook, error), event string, parkAfter time.Duration) (*bolt.Store, *waitCounter, *engine.Engine) {
	b.Helper()
	st, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	w := &waitCounter{event: event}
	e := engine.New(engine.Options{
		Store: st, Environ: []string{},
		Playbooks: engine.Playbooks{Parse: parse},
		Host:      engine.Host{ParkAfter: parkAfter},
		Observer: engine.Observer{Event: func(_ string, ev state.Event) {
			if ev.Type == w.event {
				w.n.Add(1)
			}
		}},
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

// settledRSS is VmRSS once freed memory went back to the OS, as Go's
// background scavenger does within minutes: the steady state of a process
// whose runs wait.
func settledRSS() float64 {
	debug.FreeOSMemory()
	return statusMB("VmRSS:")
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
