package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// BenchmarkFencedSaveStep is BenchmarkSaveStep's PostgreSQL case with
// and without a fence (state.WithFence: the write's transaction locks
// the run's row and checks its owner first), with synchronous_commit off
// so that the flush to disk, the same for both, does not hide the
// fence's own cost.
func BenchmarkFencedSaveStep(b *testing.B) {
	for _, c := range []struct {
		name  string
		fence bool
	}{{"plain", false}, {"fenced", true}} {
		b.Run(c.name, func(b *testing.B) {
			s := open(b, pgtest.DB(b)+"&synchronous_commit=off", postgres.Options{})
			r := benchRun("r1")
			r.Owner = "replica/1"
			if err := s.CreateRun(ctx, r); err != nil {
				b.Fatal(err)
			}
			wctx := context.Background()
			if c.fence {
				wctx = state.WithFence(wctx, state.Fence{Owner: "replica/1", Run: "r1"})
			}
			now := time.Now()
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("step-%d", i)
				rec := &state.StepRecord{RunID: "r1", ID: id, Status: state.StepSucceeded, Attempts: 1, StartedAt: now, EndedAt: now}
				if err := s.SaveStep(wctx, rec, state.Event{Time: now, Type: "step.succeeded", Step: id, Attempt: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
