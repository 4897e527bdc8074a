package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// TestStartAndRetryAnswerTheRunAsCommitted: the answer of a start or a
// retry is the new run as committed (pending, not started), even when its
// executor has started it before the answer is written.
func TestStartAndRetryAnswerTheRunAsCommitted(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "boom.yaml"), []byte(`version: 1
name: boom
steps:
  - {id: a, uses: log, with: {message: starting}}
  - {id: b, uses: fail, with: {message: boom}}
`), 0o600))
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	started := make(chan string, 4)
	s, err := New(Options{
		Engine: engine.Options{Store: store, Environ: []string{}, Observer: engine.Observer{Event: func(runID string, ev state.Event) {
			if ev.Type == "run.started" {
				started <- runID
			}
		}}},
		Playbooks: dir, Token: "t0ken",
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.runs.Suspend(5 * time.Second)
		_ = store.Close()
	})
	post := func(path, body string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t0ken")
		req.Header.Set("Content-Type", "application/json")
		w := &afterStart{ResponseRecorder: httptest.NewRecorder(), started: started}
		s.handler.ServeHTTP(w, req)
		require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
		var m map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
		assert.Equal(t, "pending", m["status"], "%s %s: %s", path, body, w.Body)
		assert.NotContains(t, m, "started_at", "%s %s: %s", path, body, w.Body)
		assert.NotContains(t, m, "owner", "%s %s: %s", path, body, w.Body)
		return m
	}
	id := post("/api/v1/playbooks/boom/runs", "")["id"].(string)
	waitRun(t, store, id, state.RunFailed)
	retry := post("/api/v1/runs/"+id+"/retry", `{"from": "a"}`)["id"].(string)
	waitRun(t, store, retry, state.RunFailed)
}

// afterStart holds an answer back until its run's executor has started
// the run: the handlers set the Location header before they encode the
// run, and Header waits for the run.started event.
type afterStart struct {
	*httptest.ResponseRecorder
	started <-chan string
	waited  bool
}

func (w *afterStart) Header() http.Header {
	if !w.waited {
		w.waited = true
		select {
		case <-w.started:
		case <-time.After(5 * time.Second):
		}
	}
	return w.ResponseRecorder.Header()
}
