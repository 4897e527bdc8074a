package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/steps"
)

// onceStarts counts the starts of test.once, which holds until released.
var onceStarts = struct {
	sync.Mutex
	n       int
	release chan struct{}
}{release: make(chan struct{})}

func init() {
	steps.Register(steps.Descriptor{Type: "test.once", Summary: "counts its starts", Run: func(ctx context.Context, call *steps.Call) (steps.Outputs, error) {
		onceStarts.Lock()
		onceStarts.n++
		release := onceStarts.release
		onceStarts.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return steps.Outputs{}, nil
	}})
}

// An assignment the server hands over again (a database crash forgot
// that it was handed over) is not started again, whether the agent still
// runs it or ran it and sent its result.
func TestAnAssignmentHandedOverAgainIsNotStartedAgain(t *testing.T) {
	var key []byte
	var mu sync.Mutex
	offers := make(chan []byte, 1)
	var polls, results atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/register", func(w http.ResponseWriter, r *http.Request) {
		var reg api.AgentRegister
		_ = json.NewDecoder(r.Body).Decode(&reg)
		mu.Lock()
		key = reg.Key
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.AgentSession{Session: "s-1", LeaseMS: 60000, PollMS: 50})
	})
	var listedMu sync.Mutex
	var listed [][]string // each poll's Running
	mux.HandleFunc("POST /api/v1/agent/poll", func(w http.ResponseWriter, r *http.Request) {
		var p api.AgentPoll
		_ = json.NewDecoder(r.Body).Decode(&p)
		listedMu.Lock()
		listed = append(listed, p.Running)
		listedMu.Unlock()
		polls.Add(1)
		var work api.AgentWork
		select {
		case sealed := <-offers:
			work.Sealed = [][]byte{sealed}
		case <-time.After(50 * time.Millisecond):
		}
		_ = json.NewEncoder(w).Encode(work)
	})
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/lines", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) })
	mux.HandleFunc("POST /api/v1/agent/assignments/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		results.Add(1)
		_, _ = w.Write([]byte("{}"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wk := &Worker{Server: srv.URL, Token: "t", Client: srv.Client(), Name: "a1", Capacity: 2, Version: "test",
		Secrets: &secrets.Source{}, Masker: secrets.NewRedactor(), Logger: slog.New(slog.DiscardHandler), Retry: 10 * time.Millisecond}
	done := make(chan struct{})
	go func() { defer close(done); _ = wk.Run(ctx) }()

	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return key != nil }, 5*time.Second, 5*time.Millisecond)
	offer := func() {
		mu.Lock()
		sealed, err := sealTo(key, mustJSON(t, api.AgentAssignment{ID: "a-1", RunID: "r-1", Step: "s", Attempt: 1, Type: "test.once", IdempotencyKey: "k"}))
		mu.Unlock()
		require.NoError(t, err)
		offers <- sealed
		// Two more polls: the one that took the offer has been answered and
		// the agent went on.
		after := polls.Load()
		require.Eventually(t, func() bool { return polls.Load() >= after+2 }, 5*time.Second, 5*time.Millisecond)
	}
	starts := func() int { onceStarts.Lock(); defer onceStarts.Unlock(); return onceStarts.n }

	offer()
	require.Eventually(t, func() bool { return starts() == 1 }, 5*time.Second, 5*time.Millisecond)
	offer() // while it runs
	assert.Equal(t, 1, starts(), "handed over again while it runs")

	close(onceStarts.release)
	require.Eventually(t, func() bool { return results.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	listedMu.Lock()
	before := len(listed)
	listedMu.Unlock()
	offer() // once it ran
	assert.Equal(t, 1, starts(), "handed over again once it ran")
	assert.Equal(t, int64(1), results.Load())
	// A poll after it says the agent has it (else the server would hand
	// it over at every poll), and the polls after that one no longer do.
	require.Eventually(t, func() bool {
		listedMu.Lock()
		defer listedMu.Unlock()
		at := slices.IndexFunc(listed[before:], func(ids []string) bool { return slices.Contains(ids, "a-1") })
		return at >= 0 && before+at+1 < len(listed) && !slices.Contains(listed[len(listed)-1], "a-1")
	}, 5*time.Second, 5*time.Millisecond, "a poll lists the assignment handed over again, and the next ones do not")
	cancel()
	<-done
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
