package trigger

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state/bolt"
)

// BenchmarkIntake posts distinct deliveries from 32 concurrent senders over
// loopback to an intake on a real, fsynced bbolt file (the Starter is a
// fake: the engine's own commit is not measured). Each delivery costs two
// commits (claim and done record); without grouped commits in the Store
// the figure is bound by fsync latency. Reported: deliveries/s and p99.
func BenchmarkIntake(b *testing.B) {
	store, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	pb, err := playbook.Parse("audit.yaml", []byte(perDeliveryPlaybook), playbook.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	in, err := NewIntake(IntakeOptions{
		Routes: map[string]Route{"sms": {Secret: testSecret}}, Store: store, Starter: &hookStarter{},
		Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{pb} },
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
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
				body := unsubscribe(fmt.Sprintf("bench-%d-%d", b.N, i), "01012345678")
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/sms", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Cloud-Webhook-Signature", testSecret)
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
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(float64(all[(len(all)*99)/100])/1e6, "p99_ms")
	}
}
