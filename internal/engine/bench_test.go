package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
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

// The steps of the benchmarks of a chain of steps (%d: the step's number).
const (
	setStep   = `{id: s%d, uses: set, with: {i: %d, prev: "${{ inputs.x }}"}}`
	shellStep = `{id: s%d, uses: shell, with: {command: "true", env: {I: "%d"}}}`
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
// until b.N steps ran, and reports the time per step.
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
	steps := 0
	for steps < b.N {
		r, err := run(pb)
		if err != nil || r.Status != state.RunSucceeded {
			b.Fatalf("run: %v %v", err, r)
		}
		steps += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(steps), "µs/step")
}
