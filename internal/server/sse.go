package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// sseHeartbeat is how often an idle stream sends a comment, so proxies
// keep it open and a dead client is noticed.
const sseHeartbeat = 15 * time.Second

// ssePoll is how often a stream re-reads the store for events the engine
// buffered (step logs are written with the step's next record).
const ssePoll = time.Second

// streamLogs streams a run's events as Server-Sent Events: first the
// stored ones after Last-Event-ID (or ?after=), then new ones as they are
// written, until the run ends ("end" event) or the client leaves. Each
// event's id is its sequence number, so a reconnecting client resumes
// exactly where it stopped. ?follow=false sends the stored events and
// ends.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseUint(v, 10, 64)
	} else if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, "after must be an event sequence number")
			return
		}
		after = n
	}
	follow := r.URL.Query().Get("follow") != "false"
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, fault.Internal, "streaming is not supported by this connection")
		return
	}
	sub := s.events.subscribe(run.ID)
	defer s.events.unsubscribe(run.ID, sub)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 2000\n\n")
	flusher.Flush()

	send := func(ev state.Event) {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
	}
	// drain sends every stored event after the last one sent and reports
	// whether the run has ended.
	drain := func() (ended bool, err error) {
		for {
			evs, err := s.store.Events(r.Context(), run.ID, after, 500)
			if err != nil {
				return false, err
			}
			for _, ev := range evs {
				send(ev)
				after = ev.Seq
			}
			if len(evs) < 500 {
				break
			}
		}
		flusher.Flush()
		cur, err := s.store.GetRun(r.Context(), run.ID)
		if err != nil {
			return false, err
		}
		if !cur.Status.Done() {
			return false, nil
		}
		// The run ended between the events read above and the run read:
		// its final events were written with the final status, so read
		// once more before the end.
		evs, err := s.store.Events(r.Context(), run.ID, after, 0)
		if err != nil {
			return false, err
		}
		for _, ev := range evs {
			send(ev)
			after = ev.Seq
		}
		flusher.Flush()
		return true, nil
	}
	end := func(status state.RunStatus) {
		b, _ := json.Marshal(api.StreamEnd{Status: status})
		fmt.Fprintf(w, "event: end\ndata: %s\n\n", b)
		flusher.Flush()
	}

	ended, err := drain()
	if err != nil {
		return
	}
	if ended || !follow {
		cur, _ := s.store.GetRun(r.Context(), run.ID)
		if cur != nil {
			end(cur.Status)
		}
		return
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	poll := time.NewTicker(ssePoll)
	defer poll.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.done:
			// Lagged or shutting down: send what is stored, then end the
			// stream; the client reconnects with Last-Event-ID.
			_, _ = drain()
			return
		case <-sub.ch:
			// Something happened: the store has it once written. Read it
			// from there so every event carries its sequence number.
		case <-poll.C:
		case <-heartbeat.C:
			fmt.Fprintf(w, ": keep-alive\n\n")
			flusher.Flush()
			continue
		}
		ended, err := drain()
		if err != nil {
			return
		}
		if ended {
			cur, _ := s.store.GetRun(r.Context(), run.ID)
			if cur != nil {
				end(cur.Status)
			}
			return
		}
	}
}

// nextSlots formats the next n fire times of a schedule in its zone.
func nextSlots(sch *playbook.Schedule, n int) ([]string, error) {
	slots, err := trigger.NextSlots(sch, time.Now(), n)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(slots))
	for i, t := range slots {
		out[i] = t.Format(time.RFC3339)
	}
	return out, nil
}
