//go:build soak

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/core"
)

// agentHandler serves the agents' protocol of d without auth (the
// server's routes, as internal/server/api_agents.go answers them).
func agentHandler(d *Dispatcher) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: err.Error(), Code: "conflict"})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /api/v1/agent/register", func(w http.ResponseWriter, r *http.Request) {
		var reg api.AgentRegister
		_ = json.NewDecoder(r.Body).Decode(&reg)
		s, err := d.Register(reg, "127.0.0.1", "load")
		answer(w, s, err)
	})
	mux.HandleFunc("POST /api/v1/agent/poll", func(w http.ResponseWriter, r *http.Request) {
		var p api.AgentPoll
		_ = json.NewDecoder(r.Body).Decode(&p)
		work, err := d.Poll(r.Context(), p)
		answer(w, work, err)
	})
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/lines", func(w http.ResponseWriter, r *http.Request) {
		var l api.AgentLines
		_ = json.NewDecoder(r.Body).Decode(&l)
		answer(w, struct{}{}, d.Lines(r.PathValue("id"), l))
	})
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		var res api.AgentResult
		_ = json.NewDecoder(r.Body).Decode(&res)
		answer(w, struct{}{}, d.Result(r.PathValue("id"), res))
	})
	return mux
}

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
	d := NewDispatcher(Options{Lease: 15 * time.Second})
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
	require.Eventually(t, func() bool { return len(d.List().Agents) == 20 }, 10*time.Second, 10*time.Millisecond)
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
			for _, a := range d.List().Agents {
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
