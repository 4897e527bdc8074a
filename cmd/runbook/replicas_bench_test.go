package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// intakeLogPlaybook starts one run of one log step per hook: the intake
// and the engine, nothing else.
const intakeLogPlaybook = `version: 1
name: sms-log
inputs:
  number: {type: string}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs:
      number: ${{ trigger.hook.recipientNo }}
steps:
  - {id: note, uses: log, with: {message: "unsubscribed ${{ inputs.number }}"}}
`

// BenchmarkReplicasIntake measures the durable webhook intake (deliveries
// acknowledged per second, each committed with its runs and dedup claims;
// 1 to 3 hooks each) of one and of three runbook serve replicas on one
// PostgreSQL database, 32 senders spread over the replicas. The replicas
// execute the runs too, on the same machine. Run it with a fixed count:
//
//	go test ./cmd/runbook -run '^$' -bench ReplicasIntake -benchtime 3000x
func BenchmarkReplicasIntake(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			for name, data := range map[string]string{
				"playbooks/sms-log.yaml": intakeLogPlaybook,
				"runbook.yaml":           "server: {reload: false, max_body: 1MiB}\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n",
			} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			dsn := pgtest.DB(b)
			urls := make([]string, n)
			for i := range n {
				_, urls[i] = benchServe(b, dir, dsn)
			}
			deliveries := makeDeliveries(b.N)
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := range 32 {
				wg.Go(func() {
					for {
						i := int(next.Add(1)) - 1
						if i >= len(deliveries) {
							return
						}
						if (&serveProc{url: urls[(i+w)%n]}).post(client, deliveries[i], "bench-secret") != http.StatusOK {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d deliveries not acknowledged", failed.Load())
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
			for _, u := range urls {
				benchWaitRuns(b, u)
			}
		})
	}
}
