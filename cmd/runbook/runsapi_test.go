package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// The real server cannot be made to lose this race on demand: its stream
// may send "end" before the events committed with the run's final status
// (it reads the events, then the status). A stand-in server does it
// every time.
func TestFollowReadsTheEventsAStreamEndedWithout(t *testing.T) {
	evs := []state.Event{
		{Seq: 1, Type: "run.started", Time: time.Now()},
		{Seq: 2, Type: "run.succeeded", Time: time.Now(), Message: "run succeeded"},
	}
	streams := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs/r1/logs", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		streams++
		w.Header().Set("Content-Type", "text/event-stream")
		if streams == 1 {
			// cut short: the client reconnects after the last event it saw
			b, _ := json.Marshal(evs[0])
			fmt.Fprintf(w, "retry: 2000\n\nid: 1\nevent: run.started\ndata: %s\n\n", b)
			return
		}
		assert.Equal(t, "1", r.URL.Query().Get("after"))
		fmt.Fprint(w, ": keep-alive\n\nevent: end\ndata: {\"status\":\"succeeded\"}\n\n")
	})
	mux.HandleFunc("GET /api/v1/runs/r1/events", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "1", r.URL.Query().Get("after"))
		_ = json.NewEncoder(w).Encode(map[string]any{"events": evs[1:], "status": "succeeded"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	b := &apiBackend{base: srv.URL, token: "tok", hc: srv.Client()}
	var got []string
	status, err := b.follow(context.Background(), "r1", 0, func(ev state.Event) bool {
		got = append(got, ev.Type)
		return true
	})
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, status)
	assert.Equal(t, []string{"run.started", "run.succeeded"}, got, "every event once, in order")
	assert.Equal(t, 2, streams)
}

func TestAPIErrorsKeepTheirCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":"run x is already succeeded","code":"conflict"}`)
	}))
	defer srv.Close()
	b := &apiBackend{base: srv.URL, token: "tok", hc: srv.Client()}
	err := b.cancel(context.Background(), "x")
	require.Error(t, err)
	assert.Equal(t, "run x is already succeeded", err.Error())
	assert.Equal(t, 1, exitCodeOf(err))
}

func exitCodeOf(err error) int {
	return (&app{stderr: discard{}, redactor: nopRedactor{}}).report(err)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
