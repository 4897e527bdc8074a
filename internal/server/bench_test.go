package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/trigger"
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

// BenchmarkWebhookIntake is trigger's BenchmarkIntake through a whole
// server: 32 concurrent senders post distinct deliveries over loopback,
// the server's runner prepares each run and the intake commits it with the
// delivery on a fsynced bbolt file; the runs then execute (one log step)
// and share the store's writer with the intake. Reported: deliveries/s and
// p99 answer time.
//
// It runs on both stores: "bolt" (a fsynced bbolt file) and "postgres" (a
// real PostgreSQL over loopback with fsync and synchronous_commit on, as
// deployed; see internal/state/postgres/pgtest).
func BenchmarkWebhookIntake(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) { benchWebhookIntake(b, st.open(b)) })
	}
}

func benchWebhookIntake(b *testing.B, store state.Store) {
	dir := b.TempDir()
	src := `version: 1
name: audit
triggers:
  - webhook: {route: sms}
steps:
  - {id: a, uses: log, with: {message: "delivery ${{ trigger.delivery }}"}}
`
	if err := os.WriteFile(filepath.Join(dir, "audit.yaml"), []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Options{
		Engine: engine.Options{Store: store, Environ: []string{}}, Playbooks: dir,
		Listen: "127.0.0.1:0", Routes: map[string]trigger.Route{"sms": {Secret: "hook-secret"}}, ShutdownGrace: 10 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	url := "http://" + srv.Addr() + "/hooks/sms"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const senders = 32
	var next atomic.Int64
	lat := make([][]time.Duration, senders)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"hooksId":"bench-%d-%d","webhookConfigId":"cfg","productName":"SMS","appKey":"app","event":"UNSUBSCRIBE",`+
					`"hooks":[{"hookId":"k-%d","recipientNo":"01012345678","unsubscribeNo":"0808885555","enterpriseName":"runbook","createdDateTime":"2026-11-22T09:00:00.000+09:00"}]}`, b.N, i, i)
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				lat[s] = append(lat[s], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(float64(all[(len(all)*99)/100])/1e6, "p99_ms")
	}
}
