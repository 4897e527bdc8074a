//go:build soak

package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/core"
)

type nopHost struct{ steps.Host }

// TestDispatchLoad places RUNBOOK_AGENT_LOAD one-step attempts (a log
// step) on 20 agents of capacity 10 over loopback HTTP,
// RUNBOOK_AGENT_INFLIGHT (default 200) at a time,
// and reports the time from the assignment made to its result back
// (which bounds dispatch latency: made -> started on the agent) and that
// no agent ran more than its capacity. go test -tags soak -run
// TestDispatchLoad ./internal/agent -v
func TestDispatchLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RUNBOOK_AGENT_LOAD"))
	if n == 0 {
		n = 10000
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	defer store.Close()
	d := NewDispatcher(Options{Store: store, Lease: 15 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	srv := httptest.NewServer(agentHandler(d))
	defer srv.Close()
	for i := range 20 {
		w := &Worker{Server: srv.URL, Token: "t", Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
			Name: fmt.Sprintf("a%02d", i), Labels: map[string]string{"pool": "load"}, Capacity: 10, Version: "load",
			Secrets: &secrets.Source{}, Masker: secrets.NewRedactor(), Logger: slog.New(slog.DiscardHandler)}
		go func() { _ = w.Run(ctx) }()
	}
	agents := func() []api.Agent { l, _ := d.List(ctx); return l.Agents }
	require.Eventually(t, func() bool { return len(agents()) == 20 }, 10*time.Second, 10*time.Millisecond)
	desc, _ := steps.Lookup("log")
	params, _, _ := desc.Decode(map[string]any{"message": "hi"})
	ro := &playbook.RunsOn{Labels: map[string]string{"pool": "load"}, OnAgentLost: playbook.AgentLostFail}

	lat := make([]time.Duration, n)
	var maxBusy int
	var mu sync.Mutex
	stopWatch := make(chan struct{})
	go func() { // capacity is never exceeded
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			for _, a := range agents() {
				mu.Lock()
				maxBusy = max(maxBusy, len(a.Running))
				mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	inflight, _ := strconv.Atoi(os.Getenv("RUNBOOK_AGENT_INFLIGHT"))
	if inflight == 0 {
		inflight = 200
	}
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			call := &steps.Call{RunID: fmt.Sprintf("run-%d", i), StepID: "s", Attempt: 1, Params: params, IdempotencyKey: "k",
				Log: slog.New(slog.DiscardHandler), Host: nopHost{}, Now: time.Now}
			t0 := time.Now()
			_, err := d.Execute(ctx, &engine.AgentAttempt{Call: call, Desc: desc, RunsOn: ro})
			lat[i] = time.Since(t0)
			if err != nil {
				t.Errorf("attempt %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(stopWatch)
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
	t.Logf("%d attempts, %d at a time, on 20 agents x 10 in %s (%.0f/s): assignment -> result back p50 %s p90 %s p99 %s max %s; most running on one agent %d",
		n, inflight, took.Round(time.Millisecond), float64(n)/took.Seconds(), q(0.5), q(0.9), q(0.99), lat[len(lat)-1], maxBusy)
	require.LessOrEqual(t, maxBusy, 10)
}

// TestDispatchLoadReplicas is the load across replicas: three
// dispatchers on one PostgreSQL, 20 agents of capacity 10 reaching any of
// them through a balancer, RUNBOOK_AGENT_LOAD attempts (default 10,000)
// RUNBOOK_AGENT_INFLIGHT at a time (default 200), replica 0 killed at a
// third of them. It reports the time from Execute (the assignment made) to
// the attempt started on the agent, p50 and p99, and fails on an attempt
// lost, run twice, or an agent above its capacity. go test -tags soak -run
// TestDispatchLoadReplicas ./internal/agent -v
func TestDispatchLoadReplicas(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RUNBOOK_AGENT_LOAD"))
	if n == 0 {
		n = 10000
	}
	inflight, _ := strconv.Atoi(os.Getenv("RUNBOOK_AGENT_INFLIGHT"))
	if inflight == 0 {
		inflight = 200
	}
	l := replicaLoad{Attempts: n, InFlight: inflight, Agents: 20, Capacity: 10, Kill: n / 3, Hold: 0}
	r := l.run(t)
	t.Logf("%d attempts, %d at a time, 3 replicas, 20 agents x 10, replica 0 killed at %d: %s (%.0f/s), %d taken over; "+
		"execute -> started on the agent p50 %s p90 %s p99 %s max %s; dispatch (placed -> started on the agent) p50 %s p90 %s p99 %s max %s; "+
		"most at once on one agent %d; lost %d, twice %d, without their line %d",
		n, inflight, l.Kill, r.took.Round(time.Millisecond), float64(n)/r.took.Seconds(), r.takenOver,
		r.quantile(0.5), r.quantile(0.9), r.quantile(0.99), r.quantile(1),
		quantile(r.dispatch, 0.5), quantile(r.dispatch, 0.9), quantile(r.dispatch, 0.99), quantile(r.dispatch, 1), r.most, r.lost, r.twice, r.noLine)
	require.Zero(t, r.lost+r.twice+r.noLine)
	require.LessOrEqual(t, r.most, 10)
}
