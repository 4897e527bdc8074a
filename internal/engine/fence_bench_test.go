package engine_test

import (
	"context"
	"fmt"
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
		{"set", setStep, 1000},
		{"shell", shellStep, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			st, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			const replica = "bench-replica/1"
			e := engine.New(engine.Options{Store: st, Environ: []string{}, Process: replica, Host: engine.Host{Fence: true}})
			ctx := context.Background()
			benchRuns(b, c.n, c.step, func(pb *playbook.Playbook) (*state.Run, error) {
				r, err := e.Start(ctx, pb, engine.StartRequest{})
				if err != nil {
					return nil, err
				}
				if ok, err := st.ClaimRun(ctx, r.ID, replica, false); err != nil || !ok {
					return nil, fmt.Errorf("claim: %v %v", ok, err)
				}
				return e.Execute(ctx, pb, r)
			})
		})
	}
}
