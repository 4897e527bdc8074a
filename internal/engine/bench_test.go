package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// BenchmarkSequentialSetSteps measures engine overhead with durable state:
// one op is one `set` step of a 1,000-step run on a real, fsynced bbolt
// file (the target is under 0.3 ms per step), and on PostgreSQL (under
// 0.5 ms, issue 14).
func BenchmarkSequentialSetSteps(b *testing.B) {
	benchSteps(b, 1000, setStep)
}

// BenchmarkSequentialShellSteps is the same over `shell: true` steps, each
// on record running before its process starts, with the end of the step
// before it: per step, one fork/exec of /bin/sh (BenchmarkExecTrue in
// steps/core is the floor) plus one fsynced commit. On PostgreSQL the chain should take at most 1.5 times
// its bbolt time (issue 14).
func BenchmarkSequentialShellSteps(b *testing.B) {
	benchSteps(b, 100, shellStep)
}

// BenchmarkSequentialMutatingSteps is the same over mutating steps
// (test.create, which calls nothing): per step, the step on record
// running, its intent written before the call (through the run's fence),
// and its end.
func BenchmarkSequentialMutatingSteps(b *testing.B) {
	benchSteps(b, 100, mutatingStep)
}

// BenchmarkEngineSteps measures the engine's own work per step, apart
// from a process and the fsync: one op is one step of a 1,000-step run of
// test.command steps on a bbolt file opened with NoSync. A test.command
// step is taken through the engine as a shell step is (its params decoded,
// on record running before its call, its end held for the next step's
// start) and returns the outputs a shell step returns, without starting a
// process. What is left per step is the engine's work and one bbolt
// transaction without its fdatasync.
func BenchmarkEngineSteps(b *testing.B) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchStepsOn(b, st, 1000, commandStep)
}

// The steps of the benchmarks of a chain of steps (%d: the step's number).
const (
	setStep      = `{id: s%d, uses: set, with: {i: %d, prev: "${{ inputs.x }}"}}`
	shellStep    = `{id: s%d, uses: shell, with: {command: "true", env: {I: "%d"}}}`
	commandStep  = `{id: s%d, uses: test.command, with: {command: "true", env: {I: "%d"}}}`
	mutatingStep = `{id: s%d, uses: test.create, with: {name: "bench-%d"}}`
)

// benchSteps runs a run of n steps, each made from step, on each store:
// "bolt" (a fsynced bbolt file) and "postgres" (a real PostgreSQL over
// loopback, fsync and synchronous_commit on; internal/state/postgres/pgtest).
func benchSteps(b *testing.B, n int, step string) {
	b.Run("bolt", func(b *testing.B) {
		st, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchStepsOn(b, st, n, step)
	})
	b.Run("postgres", func(b *testing.B) {
		st, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchStepsOn(b, st, n, step)
	})
}

func benchStepsOn(b *testing.B, st state.Store, n int, step string) {
	e := engine.New(engine.Options{Store: st, Environ: []string{}})
	benchRuns(b, n, step, func(pb *playbook.Playbook) (*state.Run, error) {
		return e.Run(context.Background(), pb, engine.StartRequest{})
	})
}

// benchRuns executes runs of n steps, each made from step, through run
// until b.N steps ran, and reports the time per step and the CPU time the
// process spent per step (cpu-µs/step: the engine, the store's writer and
// the garbage collector, without the processes of shell steps).
func benchRuns(b *testing.B, n int, step string, run func(*playbook.Playbook) (*state.Run, error)) {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: bench\ninputs:\n  x: {type: string, default: v}\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  - "+step+"\n", i, i)
	}
	pb, err := playbook.Parse("bench.yaml", []byte(sb.String()), playbook.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := processCPU(b)
	steps := 0
	for steps < b.N {
		r, err := run(pb)
		if err != nil || r.Status != state.RunSucceeded {
			b.Fatalf("run: %v %v", err, r)
		}
		steps += n
	}
	b.StopTimer()
	cpu = processCPU(b) - cpu
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(steps), "µs/step")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(steps), "cpu-µs/step")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
