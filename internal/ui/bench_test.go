package ui_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// Performance of the UI, server side, over loopback HTTP (so each figure
// includes the round trip on top of the server's time):
//
//	go test ./internal/ui -run XXX -bench . -benchtime 20x
//
// BenchmarkRunsPage: the runs page with 100,000 runs in the store (first
// page, and a page 50,000 runs deep). BenchmarkRunPage: a run of 1,000
// steps. BenchmarkLiveUpdate: from an approval's answer (its commit) to
// its event arriving through the page's stream.

// seedStore writes n finished runs into a new state file, concurrently
// (the store groups concurrent commits).
func seedStore(b *testing.B, path string, n int) {
	b.Helper()
	store, err := bolt.Open(path, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(b, err)
	defer store.Close()
	base := time.Now().Add(-time.Duration(n) * time.Second)
	statuses := []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunCancelled, state.RunSucceeded}
	var wg sync.WaitGroup
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				r := &state.Run{ID: fmt.Sprintf("20261101T%06d-%06x", i, i), Playbook: fmt.Sprintf("pb-%d", i%20), Hash: "h",
					Snapshot: []byte("version: 1\n"), Status: statuses[i%4], Inputs: map[string]any{"cluster": "prod-a"},
					Trigger:   map[string]any{"type": "schedule", "slot": base.Format(time.RFC3339)},
					CreatedAt: base.Add(time.Duration(i) * time.Second), StartedAt: base, EndedAt: base.Add(time.Second)}
				if r.Status == state.RunFailed {
					r.Error = &state.ErrorRecord{Code: "failed", Message: "step upgrade: node group pool-b did not become ready"}
				}
				if err := store.CreateRun(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchServer starts a server over a state file for a benchmark and
// returns a signed-in client.
func benchServer(b *testing.B, statePath string, playbooks map[string]string) *uiEnv {
	b.Helper()
	dir := b.TempDir()
	for name, src := range playbooks {
		require.NoError(b, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(b, err)
	srv, err := server.New(server.Options{Engine: engine.Options{Store: store, Environ: []string{}}, Playbooks: dir,
		Listen: "127.0.0.1:0", Token: token, ShutdownGrace: 5 * time.Second})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	b.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	e := newClient(b, srv, "http://"+srv.Addr())
	p := e.login(token, "bench")
	require.Equal(b, http.StatusSeeOther, p.status)
	return e
}

func (e *uiEnv) timedGet(b *testing.B, path string) page {
	b.Helper()
	p := e.get(path)
	if p.status != http.StatusOK {
		b.Fatalf("GET %s: %d\n%s", path, p.status, p.body)
	}
	return p
}

func BenchmarkRunsPage(b *testing.B) {
	statePath := filepath.Join(b.TempDir(), "state.db")
	seedStore(b, statePath, 100000)
	e := benchServer(b, statePath, map[string]string{"demo.yaml": demoPlaybook})

	b.Run("first page of 100000 runs", func(b *testing.B) {
		for b.Loop() {
			e.timedGet(b, "/runs")
		}
	})
	b.Run("first page of the failed runs of one playbook", func(b *testing.B) {
		for b.Loop() {
			e.timedGet(b, "/runs?status=failed&playbook=pb-3")
		}
	})
	// The page 50,000 runs deep: follow the cursor there once.
	deep := "/runs"
	next := regexp.MustCompile(`href="(/runs\?before=[^"]+)"[^>]*rel="next"`)
	for range 1000 {
		p := e.timedGet(b, deep)
		m := next.FindStringSubmatch(p.body)
		require.NotNil(b, m)
		deep = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	b.Run("a page 50000 runs deep", func(b *testing.B) {
		for b.Loop() {
			e.timedGet(b, deep)
		}
	})
}

// longPlaybook has n steps, in order.
func longPlaybook(n int) string {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: long\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - id: s%04d\n    uses: log\n    with: {message: \"step %d of %d\"}\n", i, i, n)
	}
	return sb.String()
}

func BenchmarkRunPage(b *testing.B) {
	e := benchServer(b, filepath.Join(b.TempDir(), "state.db"), map[string]string{"long.yaml": longPlaybook(1000)})
	tok := csrf(b, e.get("/runs").body)
	p := e.post("/playbooks/long/runs", url.Values{"csrf": {tok}})
	require.Equal(b, http.StatusSeeOther, p.status)
	path := p.location
	deadline := time.Now().Add(60 * time.Second)
	for strings.Contains(e.timedGet(b, path).body, "data-follow") {
		require.True(b, time.Now().Before(deadline), "the run of 1000 steps did not finish")
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(0, "ns/op")
	b.Logf("the page of a run of 1000 steps is %d bytes", len(e.timedGet(b, path).body))
	b.Run("a run of 1000 steps", func(b *testing.B) {
		for b.Loop() {
			e.timedGet(b, path)
		}
	})
}

// sseReader reads the events of a page's stream.
type sseReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openStream(b *testing.B, e *uiEnv, runID string) *sseReader {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+"/runs/"+runID+"/live", nil)
	require.NoError(b, err)
	resp, err := e.client.Do(req)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode)
	return &sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// until reads until an event of type typ arrives.
func (s *sseReader) until(b *testing.B, typ string) {
	b.Helper()
	for s.sc.Scan() {
		if s.sc.Text() == "event: "+typ {
			return
		}
	}
	b.Fatalf("the stream ended before %s: %v", typ, s.sc.Err())
}

const gatePlaybook = `version: 1
name: gate
steps:
  - id: ok
    uses: approval
    with: {message: "go on?"}
`

func BenchmarkLiveUpdate(b *testing.B) {
	e := benchServer(b, filepath.Join(b.TempDir(), "state.db"), map[string]string{"gate.yaml": gatePlaybook})
	tok := csrf(b, e.get("/runs").body)
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		p := e.post("/playbooks/gate/runs", url.Values{"csrf": {tok}})
		require.Equal(b, http.StatusSeeOther, p.status)
		id, err := url.PathUnescape(strings.TrimPrefix(p.location, "/runs/"))
		require.NoError(b, err)
		s := openStream(b, e, id)
		s.until(b, "step.waiting")
		b.StartTimer()
		t0 := time.Now()
		ans := e.post("/runs/"+id+"/approve", url.Values{"csrf": {tok}, "step": {"ok"}, "decision": {"approve"}})
		require.Equal(b, http.StatusSeeOther, ans.status, ans.body)
		s.until(b, "approval.answered")
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		s.resp.Body.Close()
		b.StartTimer()
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99_ms")
	}
}
