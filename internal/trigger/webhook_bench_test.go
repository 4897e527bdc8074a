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
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
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
			benchIntake(b, []state.Store{st.open(b)}, func(store state.Store) benchPreparer { return benchPreparer{&benchStarter{store: store}} })
		})
	}
}

// BenchmarkIntakeReplicas is BenchmarkIntake/postgres with one and with
// three intakes on one PostgreSQL database, as one and three runbook
// serve replicas would take webhooks: each intake has its own Store (its
// own pool and group commits) and listener, and the 32 senders are spread
// over them. Three together should take at least what one does:
//
//	go test ./internal/trigger -run '^$' -bench IntakeReplicas -benchtime 10000x
func BenchmarkIntakeReplicas(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			dsn := pgtest.DB(b)
			stores := make([]state.Store, n)
			for i := range stores {
				s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				stores[i] = s
			}
			benchIntake(b, stores, func(store state.Store) benchPreparer { return benchPreparer{&benchStarter{store: store}} })
		})
	}
}

// benchIntake posts b.N distinct deliveries from 32 senders to one intake
// per store, each sender's deliveries spread over the intakes in turn.
func benchIntake(b *testing.B, stores []state.Store, starter func(state.Store) benchPreparer) {
	pb, err := playbook.Parse("audit.yaml", []byte(perDeliveryPlaybook), playbook.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	urls := make([]string, len(stores))
	for i, store := range stores {
		st := starter(store)
		st.tag = string(rune('a' + i)) // run IDs unique across the intakes
		in, err := NewIntake(IntakeOptions{
			Routes: map[string]Route{"sms": {Secret: testSecret}}, Store: store, Starter: st,
			Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{pb} },
		})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(in)
		defer srv.Close()
		urls[i] = srv.URL
	}
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
				req, _ := http.NewRequest(http.MethodPost, urls[int(i)%len(urls)]+"/hooks/sms", bytes.NewReader(body))
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
		var groups, grouped int64
		for _, s := range stores {
			if g, ok := s.(interface{ DeliveryGroups() (int64, int64) }); ok {
				n, m := g.DeliveryGroups()
				groups, grouped = groups+n, grouped+m
			}
		}
		if groups > 0 {
			b.ReportMetric(float64(grouped)/float64(groups), "deliveries/group")
		}
	}
}

// benchStarter builds what the engine's Prepare builds for a run: a
// pending record with the playbook snapshot and a run.created event.
type benchStarter struct {
	store state.Store
	tag   string // in each run ID, after the second: "a" for the first intake
	n     atomic.Int64
}

func (s *benchStarter) record(req StartRequest) (*state.Run, state.Event) {
	pb := req.Playbook
	now := time.Now()
	// Shaped like the engine's IDs (UTC second, then a suffix), so that
	// new runs land at the end of the store's run indexes as they do there.
	id := fmt.Sprintf("%s-%s%06d", now.UTC().Format("20060102T150405"), s.tag, s.n.Add(1))
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
