package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// BenchmarkScheduleLateness runs a server with 20 playbooks scheduled every
// second on the real clock, over a fsynced bbolt file, for 6 seconds per
// b.N, and measures how late each run was committed after its slot:
// run.CreatedAt minus trigger.slot. Reported: p50, p99 and max in ms.
func BenchmarkScheduleLateness(b *testing.B) {
	const playbooks = 20
	dir := b.TempDir()
	for i := range playbooks {
		src := fmt.Sprintf(`version: 1
name: tick-%02d
triggers:
  - schedule: {cron: "* * * * * *", overlap: allow}
steps:
  - {id: a, uses: set, with: {values: {n: %d}}}
`, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tick-%02d.yaml", i)), []byte(src), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	store, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	srv, err := server.New(server.Options{
		Engine: engine.Options{Store: store, Environ: []string{}}, Playbooks: dir,
		Listen: "127.0.0.1:0", Schedules: true, ShutdownGrace: 5 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	time.Sleep(time.Duration(b.N) * 6 * time.Second)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runs, err := store.ListRuns(context.Background(), state.RunFilter{})
	if err != nil {
		b.Fatal(err)
	}
	var late []time.Duration
	for _, r := range runs {
		slot, err := time.Parse(time.RFC3339, fmt.Sprint(r.Trigger["slot"]))
		if err != nil {
			b.Fatalf("run %s: slot %v", r.ID, r.Trigger["slot"])
		}
		late = append(late, r.CreatedAt.Sub(slot))
	}
	if len(late) < playbooks*4*b.N {
		b.Fatalf("only %d scheduled runs in %d s", len(late), 6*b.N)
	}
	slices.Sort(late)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(float64(len(late)), "runs")
	b.ReportMetric(ms(late[len(late)/2]), "p50_ms")
	b.ReportMetric(ms(late[len(late)*99/100]), "p99_ms")
	b.ReportMetric(ms(late[len(late)-1]), "max_ms")
}
