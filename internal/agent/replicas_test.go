package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/steps"
)

// TestMain lets the tests use a throwaway PostgreSQL (pgtest.DB).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// agentHandler serves the agents' protocol of d without auth (the
// server's routes, as internal/server/api_agents.go answers them).
func agentHandler(d *Dispatcher) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case errors.Is(err, ErrLost):
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: err.Error(), Code: "conflict"})
			return
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: err.Error(), Code: "unavailable"})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /api/v1/agent/register", func(w http.ResponseWriter, r *http.Request) {
		var reg api.AgentRegister
		_ = json.NewDecoder(r.Body).Decode(&reg)
		s, err := d.Register(r.Context(), reg, "127.0.0.1", "load")
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
		answer(w, struct{}{}, d.Lines(r.Context(), r.PathValue("id"), l))
	})
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/host", func(w http.ResponseWriter, r *http.Request) {
		var hc api.AgentHostCall
		_ = json.NewDecoder(r.Body).Decode(&hc)
		ans, err := d.Host(r.Context(), r.PathValue("id"), hc)
		answer(w, ans, err)
	})
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		var res api.AgentResult
		_ = json.NewDecoder(r.Body).Decode(&res)
		answer(w, struct{}{}, d.Result(r.Context(), r.PathValue("id"), res))
	})
	return mux
}

// The probe step records when and where (Call.Dir: the agent's name, as
// the load's workers set it) each attempt started, how many attempts of
// its agent ran at once, and asks its host for a cursor (answered by the
// run's owner, through the replica the request reached).
var probes = struct {
	sync.Mutex
	started map[string][]time.Time // by run
	running map[string]int         // by agent
	most    map[string]int         // by agent
	hold    time.Duration
}{started: map[string][]time.Time{}, running: map[string]int{}, most: map[string]int{}}

func init() {
	steps.Register(steps.Descriptor{Type: "test.agentprobe", Summary: "an agent load's probe", Run: func(ctx context.Context, call *steps.Call) (steps.Outputs, error) {
		now := time.Now()
		probes.Lock()
		probes.started[call.RunID] = append(probes.started[call.RunID], now)
		probes.running[call.Dir]++
		probes.most[call.Dir] = max(probes.most[call.Dir], probes.running[call.Dir])
		hold := probes.hold
		probes.Unlock()
		defer func() {
			probes.Lock()
			probes.running[call.Dir]--
			probes.Unlock()
		}()
		cur, err := call.Host.Cursor(ctx, "k")
		if err != nil {
			return nil, err
		}
		call.Print(steps.StreamStdout, "probe of "+call.RunID)
		select {
		case <-time.After(hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return steps.Outputs{"cursor": string(cur)}, nil
	}})
}

// probeHost is an owner's host of a probe: its cursor is its run's ID.
type probeHost struct {
	steps.Host
	run string
}

func (h probeHost) Cursor(context.Context, string) ([]byte, error) { return []byte(h.run), nil }

// lineCount counts the lines the owner received.
type lineCount struct{ n atomic.Int64 }

func (l *lineCount) Line(string, string) { l.n.Add(1) }

// replicaLoad is three dispatchers, each on its own store of one
// PostgreSQL database and behind its own loopback HTTP server, and
// agents that reach them through a balancer that sends each request to
// the next live replica: polls, lines, host calls and results land on
// any replica. Attempts are executed by the replicas in turn. At kill
// (when > 0 attempts were started) replica 0 dies: its server stops
// answering and its waiting Executes stop as a killed process's do (the
// cause: fenced); each of its attempts is then executed again by replica
// 1, as the engine resumes a run taken over (the next attempt number).
type replicaLoad struct {
	Attempts, InFlight, Agents, Capacity, Kill int
	Hold                                       time.Duration
}

type loadResult struct {
	took    time.Duration
	latency []time.Duration // execute -> started on the agent, attempts not taken over
	// dispatch: placed -> started on the agent, as Options.Dispatched
	// tells it (the assignment made -> the attempt started)
	dispatch            []time.Duration
	lost, twice, noLine int
	takenOver           int
	most                int // the most attempts one agent ran at once
}

func (l replicaLoad) run(t *testing.T) loadResult {
	dsn := pgtest.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probes.Lock()
	probes.hold = l.Hold
	clear(probes.started)
	clear(probes.running)
	clear(probes.most)
	probes.Unlock()

	var res loadResult
	var dmu sync.Mutex
	dispatched := func(d time.Duration) { dmu.Lock(); res.dispatch = append(res.dispatch, d); dmu.Unlock() }
	var ds [3]*Dispatcher
	var stop [3]context.CancelFunc
	var backends [3]*url.URL
	var dead [3]atomic.Bool
	for i := range 3 {
		st, err := postgres.Open(ctx, dsn, postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		ds[i] = NewDispatcher(Options{Store: st, Notices: st, Lease: 5 * time.Second, Dispatched: dispatched})
		rctx, rcancel := context.WithCancel(ctx)
		stop[i] = rcancel
		go ds[i].Run(rctx)
		srv := httptest.NewServer(agentHandler(ds[i]))
		t.Cleanup(srv.Close)
		backends[i], _ = url.Parse(srv.URL)
	}
	var next atomic.Uint64
	balancer := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		for {
			i := next.Add(1) % 3
			if !dead[i].Load() {
				r.SetURL(backends[i])
				return
			}
		}
	}})
	t.Cleanup(balancer.Close)

	for i := range l.Agents {
		w := &Worker{Server: balancer.URL, Token: "t", Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
			Name: fmt.Sprintf("a%02d", i), Labels: map[string]string{"pool": "load"}, Capacity: l.Capacity, Version: "load",
			Dir: fmt.Sprintf("a%02d", i), Secrets: &secrets.Source{}, Masker: secrets.NewRedactor(), Logger: slog.New(slog.DiscardHandler),
			Retry: 50 * time.Millisecond}
		go func() { _ = w.Run(ctx) }()
	}
	require.Eventually(t, func() bool { ls, _ := ds[1].List(ctx); return len(ls.Agents) == l.Agents }, 20*time.Second, 20*time.Millisecond)

	desc, _ := steps.Lookup("test.agentprobe")
	ro := &playbook.RunsOn{Labels: map[string]string{"pool": "load"}, OnAgentLost: playbook.AgentLostFail}
	var mu sync.Mutex
	var killed [3]struct {
		sync.Mutex
		inflight map[int]context.CancelCauseFunc
	}
	for i := range killed {
		killed[i].inflight = map[int]context.CancelCauseFunc{}
	}
	// execute executes an attempt on replica r; an attempt the replica's
	// death stopped (whatever it was doing: recording, placing, waiting)
	// ends fenced, as the run's next owner sees it.
	execute := func(i, r int, a *engine.AgentAttempt) (steps.Outputs, error) {
		actx, acancel := context.WithCancelCause(ctx)
		defer acancel(nil)
		killed[r].Lock()
		if dead[r].Load() {
			killed[r].Unlock()
			return nil, state.ErrFenced
		}
		killed[r].inflight[i] = acancel
		killed[r].Unlock()
		defer func() { killed[r].Lock(); delete(killed[r].inflight, i); killed[r].Unlock() }()
		out, err := ds[r].Execute(actx, a)
		if err != nil && errors.Is(context.Cause(actx), state.ErrFenced) {
			return nil, context.Cause(actx)
		}
		return out, err
	}
	sem := make(chan struct{}, l.InFlight)
	latency := make([]time.Duration, l.Attempts)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range l.Attempts {
		if i == l.Kill && l.Kill > 0 {
			killed[0].Lock()
			dead[0].Store(true)
			stop[0]()
			for _, c := range killed[0].inflight {
				c(fmt.Errorf("replica 0 killed: %w", state.ErrFenced))
			}
			killed[0].Unlock()
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run := fmt.Sprintf("run-%05d", i)
			lines := &lineCount{}
			call := &steps.Call{RunID: run, StepID: "probe", Attempt: 1, IdempotencyKey: run + "/probe",
				Log: slog.New(slog.DiscardHandler), Host: probeHost{run: run}, Now: time.Now, Output: lines}
			a := &engine.AgentAttempt{Call: call, Desc: desc, RunsOn: ro}
			owner := i % 3
			if dead[owner].Load() {
				owner = 1 + i%2
			}
			t0 := time.Now()
			out, err := execute(i, owner, a)
			over := errors.Is(err, state.ErrFenced)
			if over { // taken over: the engine executes the step again
				call.Attempt++
				out, err = execute(i, 1, a)
			}
			probes.Lock()
			startedAt := probes.started[run]
			probes.Unlock()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || out["cursor"] != run:
				res.lost++
				t.Errorf("attempt %d: %v %v", i, out, err)
			case len(startedAt) != 1:
				res.twice++
				t.Errorf("attempt %d started %d times", i, len(startedAt))
			case over:
				res.takenOver++
			default:
				latency[i] = startedAt[0].Sub(t0)
				if lines.n.Load() != 1 {
					res.noLine++
					t.Errorf("attempt %d: %d lines came back, want 1", i, lines.n.Load())
				}
			}
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	for _, d := range latency {
		if d > 0 {
			res.latency = append(res.latency, d)
		}
	}
	slices.Sort(res.latency)
	dmu.Lock()
	slices.Sort(res.dispatch)
	dmu.Unlock()
	probes.Lock()
	for _, n := range probes.most {
		res.most = max(res.most, n)
	}
	probes.Unlock()
	return res
}

func (r loadResult) quantile(p float64) time.Duration { return quantile(r.latency, p) }

// quantile is the p quantile of sorted ds.
func quantile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[int(float64(len(ds)-1)*p)]
}

// Three replicas, agents reaching any of them, and a replica killed
// mid-load: every attempt is placed once and ends (the ones the killed
// replica waited on too, waited for by the replica that took them over),
// no agent runs more than its capacity at once, and each attempt's line
// and host call reach its owner whichever replica the agent reached.
func TestAgentsServeEveryReplicaAndAKilledOnesAttemptsEnd(t *testing.T) {
	l := replicaLoad{Attempts: 150, InFlight: 30, Agents: 6, Capacity: 3, Kill: 60, Hold: 100 * time.Millisecond}
	r := l.run(t)
	t.Logf("%d attempts in %s, %d taken over; execute -> started p50 %s p99 %s; placed -> started p50 %s p99 %s; most at once on one agent %d",
		l.Attempts, r.took.Round(time.Millisecond), r.takenOver, r.quantile(0.5), r.quantile(0.99),
		quantile(r.dispatch, 0.5), quantile(r.dispatch, 0.99), r.most)
	assert.Zero(t, r.lost+r.twice+r.noLine)
	// Each attempt placed by a live replica is told; one placed by the
	// killed replica and taken over is not.
	assert.GreaterOrEqual(t, len(r.dispatch), l.Attempts-r.takenOver, "the dispatch latency of every attempt not taken over")
	assert.LessOrEqual(t, len(r.dispatch), l.Attempts)
	assert.Positive(t, r.takenOver, "the killed replica was waiting on attempts")
	assert.LessOrEqual(t, r.most, l.Capacity)
}

// An agent whose poll reaches a replica that never answers (stopped with
// SIGSTOP, or cut off by a network that drops its packets) gives that
// poll up while its lease holds, and its next poll, through the balancer
// to a live replica, renews it: its session never lapses. Before, a poll
// was held for its hold and 10 s, past the lease, and the agent was lost.
func TestAnAgentWhosePollAReplicaNeverAnswersKeepsItsSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := postgres.Open(ctx, pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const lease = 4500 * time.Millisecond // polls held 1.5 s, given up after 2.25 s
	d := NewDispatcher(Options{Store: st, Notices: st, Lease: lease})
	go d.Run(ctx)
	live := httptest.NewServer(agentHandler(d))
	t.Cleanup(live.Close)
	gone := make(chan struct{}) // the stopped replica's process ends with the test
	stopped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-gone:
		}
	}))
	t.Cleanup(stopped.Close)
	t.Cleanup(func() { close(gone) }) // before the servers close
	liveURL, _ := url.Parse(live.URL)
	stoppedURL, _ := url.Parse(stopped.URL)
	var polls atomic.Int64
	balancer := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(liveURL)
		if r.In.URL.Path == "/api/v1/agent/poll" && polls.Add(1)%2 == 0 {
			r.SetURL(stoppedURL) // every other poll
		}
	}})
	t.Cleanup(balancer.Close)
	w := &Worker{Server: balancer.URL, Token: "t", Client: &http.Client{}, Name: "a1", Labels: map[string]string{"pool": "p"}, Capacity: 1, Version: "test",
		Dir: "a1", Secrets: &secrets.Source{}, Masker: secrets.NewRedactor(), Logger: slog.New(slog.DiscardHandler), Retry: 50 * time.Millisecond}
	go func() { _ = w.Run(ctx) }()
	require.Eventually(t, func() bool { ls, _ := d.List(ctx); return len(ls.Agents) == 1 }, 10*time.Second, 20*time.Millisecond)
	first, _ := d.List(ctx)
	for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ls, err := d.List(ctx)
		require.NoError(t, err)
		require.Len(t, ls.Agents, 1, "the agent's session lapsed")
		require.Equal(t, first.Agents[0].Session, ls.Agents[0].Session, "the agent registered again")
	}
	assert.GreaterOrEqual(t, polls.Load(), int64(4), "polls reached the replica that never answers")
}
