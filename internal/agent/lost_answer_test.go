package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/steps"
)

var quickStarts atomic.Int64

func init() {
	steps.Register(steps.Descriptor{Type: "test.quick", Summary: "counts its starts", Run: func(ctx context.Context, call *steps.Call) (steps.Outputs, error) {
		quickStarts.Add(1)
		return steps.Outputs{"run": call.RunID}, nil
	}})
}

type noHost struct{ steps.Host }

// A poll's answer that carried an attempt and never reached its agent
// (the replica that held the poll was killed, the connection broke) does
// not lose the attempt: the agent's next poll, which does not list it as
// running, gets it again, and it runs once.
func TestAnAttemptWhosePollAnswerWasLostIsOfferedAgain(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	defer store.Close()
	d := NewDispatcher(Options{Store: store, Lease: 15 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go d.Run(ctx)
	inner := agentHandler(d)
	var dropped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/agent/poll" || dropped.Load() {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var work api.AgentWork
		_ = json.Unmarshal(rec.Body.Bytes(), &work)
		if len(work.Sealed) > 0 && dropped.CompareAndSwap(false, true) {
			panic(http.ErrAbortHandler) // the connection closes, no answer
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	wk := &Worker{Server: srv.URL, Token: "t", Client: srv.Client(), Name: "a1", Labels: map[string]string{"pool": "p"}, Capacity: 1,
		Version: "test", Secrets: &secrets.Source{}, Masker: secrets.NewRedactor(), Logger: slog.New(slog.DiscardHandler), Retry: 10 * time.Millisecond}
	go func() { _ = wk.Run(ctx) }()
	require.Eventually(t, func() bool { l, _ := d.List(ctx); return len(l.Agents) == 1 }, 5*time.Second, 5*time.Millisecond)

	desc, _ := steps.Lookup("test.quick")
	var logs bytes.Buffer
	call := &steps.Call{RunID: "run-1", StepID: "s", Attempt: 1, IdempotencyKey: "run-1/s", Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Host: noHost{}, Now: time.Now}
	out, err := d.Execute(ctx, &engine.AgentAttempt{Call: call, Desc: desc,
		RunsOn: &playbook.RunsOn{Labels: map[string]string{"pool": "p"}, OnAgentLost: playbook.AgentLostFail}})
	require.NoError(t, err, "the attempt whose answer was lost: %s", logs.String())
	assert.True(t, dropped.Load(), "the answer that carried the attempt was dropped")
	assert.Equal(t, "run-1", fmt.Sprint(out["run"]))
	assert.Equal(t, int64(1), quickStarts.Load())
	cancel() // the dispatcher answers the held poll: the server closes at once
}
