package trigger

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// BenchmarkIntake posts distinct deliveries from 32 concurrent senders over
// loopback to an intake on a real, fsynced bbolt file. The Starter is a
// Preparer that builds a pending run record per start, as the engine does,
// so each delivery costs one update (claim, run and done record together);
// concurrent deliveries share commits through the store's group commits.
// Reported: deliveries/s and p99 answer time.
//
// It runs on both stores: "bolt" and "postgres" (a real PostgreSQL over
// loopback, fsync and synchronous_commit on; see
// internal/state/postgres/pgtest), where each delivery is one
// CommitDelivery transaction and concurrent ones share WAL flushes.
func BenchmarkIntake(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			benchIntake(b, st.open(b), func(store state.Store) Starter { return benchPreparer{&benchStarter{store: store}} })
		})
	}
}

// BenchmarkIntakeStarter is BenchmarkIntake with a plain Starter, which
// commits each run itself: three updates per delivery (claim, run, done
// record).
func BenchmarkIntakeStarter(b *testing.B) {
	benchIntake(b, benchStores[0].open(b), func(store state.Store) Starter { return &benchStarter{store: store} })
}

func benchIntake(b *testing.B, store state.Store, starter func(state.Store) Starter) {
	pb, err := playbook.Parse("audit.yaml", []byte(perDeliveryPlaybook), playbook.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	in, err := NewIntake(IntakeOptions{
		Routes: map[string]Route{"sms": {Secret: testSecret}}, Store: store, Starter: starter(store),
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

// benchStarter commits what the engine's Start commits for a run: a
// pending record with the playbook snapshot and a run.created event.
type benchStarter struct {
	store state.Store
	n     atomic.Int64
}

func (s *benchStarter) Start(ctx context.Context, req StartRequest) (string, error) {
	r, ev := s.record(req)
	if err := s.store.CreateRun(ctx, r, ev); err != nil {
		return "", err
	}
	return r.ID, nil
}

func (s *benchStarter) record(req StartRequest) (*state.Run, state.Event) {
	pb := req.Playbook
	now := time.Now()
	// Shaped like the engine's IDs (UTC second, then a suffix), so that
	// new runs land at the end of the store's run indexes as they do there.
	id := fmt.Sprintf("%s-%06d", now.UTC().Format("20060102T150405"), s.n.Add(1))
	r := &state.Run{
		ID: id, Playbook: pb.Name, File: pb.Path, Snapshot: pb.Source, Hash: pb.Hash,
		Inputs: req.Inputs, Trigger: req.Trigger, Status: state.RunPending, CreatedAt: now,
	}
	return r, state.Event{Time: now, Type: "run.created", Message: "run created for playbook " + pb.Name}
}

// benchPreparer is a benchStarter whose runs the intake commits.
type benchPreparer struct{ *benchStarter }

func (s benchPreparer) Prepare(_ context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	r, ev := s.record(req)
	return r, []state.Event{ev}, nil
}

func (s benchPreparer) Launch(...*state.Run) {}

func (s *benchStarter) Active(string) []string { return nil }
func (s *benchStarter) Cancel(string)          {}
