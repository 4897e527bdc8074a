package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// BenchmarkFencedSteps is BenchmarkSequentialSetSteps and
// BenchmarkSequentialShellSteps on PostgreSQL as a replica executes runs:
// claimed first, every write fenced (Options.Fence; the write's
// transaction locks the run's row and checks its owner). Compare with
// their "postgres" sub-benchmarks for the cost of fencing.
func BenchmarkFencedSteps(b *testing.B) {
	for _, c := range []struct {
		name, step string
		n          int
	}{
		{"set", `{id: s%d, uses: set, with: {i: %d, prev: "${{ inputs.x }}"}}`, 1000},
		{"shell", `{id: s%d, uses: shell, with: {command: "true", env: {I: "%d"}}}`, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			st, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var sb strings.Builder
			sb.WriteString("version: 1\nname: bench\ninputs:\n  x: {type: string, default: v}\nsteps:\n")
			for i := range c.n {
				fmt.Fprintf(&sb, "  - "+c.step+"\n", i, i)
			}
			pb, err := playbook.Parse("bench.yaml", []byte(sb.String()), playbook.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			const replica = "bench-replica/1"
			e := engine.New(engine.Options{Store: st, Environ: []string{}, Fence: true, Process: replica})
			ctx := context.Background()
			b.ResetTimer()
			steps := 0
			for steps < b.N {
				r, err := e.Start(ctx, pb, engine.StartRequest{})
				if err != nil {
					b.Fatal(err)
				}
				if ok, err := st.ClaimRun(ctx, r.ID, replica, false); err != nil || !ok {
					b.Fatalf("claim: %v %v", ok, err)
				}
				r, err = e.Execute(ctx, pb, r)
				if err != nil || r.Status != state.RunSucceeded {
					b.Fatalf("run: %v %v", err, r)
				}
				steps += c.n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(steps), "µs/step")
		})
	}
}
