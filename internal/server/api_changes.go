package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// changesEvery bounds how often GET /api/v1/changes says "changed": the
// run events of a moment (a run's start and its first steps, a burst of
// webhook runs) make one.
const changesEvery = 500 * time.Millisecond

// changesPoll is how often the stream says "changed" with no event of
// this server: the runs another replica executes (whose events this
// one does not see) reach a list within it.
const changesPoll = 10 * time.Second

// streamChanges answers GET /api/v1/changes: Server-Sent Events that say
// that runs changed (created, started, queued, waiting, ended), for lists
// to read themselves again, instead of polling. An event carries no run:
// it tells only that something changed, so a caller scoped to some
// playbooks learns nothing of the others; the list it reads again is
// scoped. Events come from this server's engine (the event source of
// GET /api/v1/runs/{id}/logs), at most one per changesEvery, and one
// every changesPoll regardless.
func (s *Server) streamChanges(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, fault.Internal, "streaming is not supported by this connection")
		return
	}
	streaming(w)
	sub := s.events.subscribe(allRuns)
	defer s.events.unsubscribe(allRuns, sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(typ, data string) bool {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if _, err := fmt.Fprintf(w, "retry: 2000\n\n"); err != nil || !send("ready", "{}") {
		return
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	poll := time.NewTicker(changesPoll)
	defer poll.Stop()
	var last time.Time
	held := time.NewTimer(time.Hour)
	held.Stop()
	pending := false
	changed := func(why string) bool {
		pending = false
		last = time.Now()
		return send("changed", fmt.Sprintf(`{"why":%q}`, why))
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.done: // the server stops, or this stream lagged: the client reconnects
			return
		case ev := <-sub.ch:
			if wait := changesEvery - time.Since(last); wait > 0 {
				if !pending {
					pending = true
					held.Reset(wait)
				}
				continue
			}
			if !changed(ev.Type) {
				return
			}
		case <-held.C:
			if pending && !changed("events") {
				return
			}
		case <-poll.C:
			if !changed("poll") {
				return
			}
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
