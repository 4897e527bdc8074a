package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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
// buffered (step logs are written with the step's next record);
// sseOutputPoll is the same for a stream with step output, whose lines
// the engine writes every 200 ms while a step prints.
const (
	ssePoll       = time.Second
	sseOutputPoll = 250 * time.Millisecond
)

// ssePage bounds the events or lines one store read returns.
const ssePage = 500

// logStream is one client's stream of GET /api/v1/runs/{id}/logs.
type logStream struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	flusher http.Flusher
	runID   string
	// events: the run's events are sent; output: the steps' output lines
	// are (of step only, when set), as "output" events.
	events bool
	output bool
	step   string
	// after and outAfter are the last event and line sent.
	after, outAfter uint64
}

// streamLogs streams a run's events as Server-Sent Events: first the
// stored ones after Last-Event-ID (or ?after=), then new ones as they are
// written, until the run ends ("end" event) or the client leaves. Each
// event's id is its sequence number, so a reconnecting client resumes
// exactly where it stopped. ?follow=false sends the stored events and
// ends. ?output=true adds the steps' output lines as "output" events
// (?step= keeps one step's, and the stream ends once that step has;
// ?events=false leaves the run's events out);
// ids are then "E.O", the last event's and the last line's sequence
// numbers, and ?output_after=O resumes the lines.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	q := r.URL.Query()
	ls := &logStream{s: s, w: w, r: r, runID: run.ID, events: q.Get("events") != "false", step: q.Get("step")}
	if q.Get("output") == "true" {
		ls.output = true
	} else {
		ls.events = true
	}
	if !ls.cursor(w, r) {
		return
	}
	follow := q.Get("follow") != "false"
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, fault.Internal, "streaming is not supported by this connection")
		return
	}
	ls.flusher = flusher
	if follow {
		streaming(w)
	}
	sub := s.events.subscribe(run.ID)
	defer s.events.unsubscribe(run.ID, sub)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 2000\n\n")
	flusher.Flush()

	ended, err := ls.drain()
	if err != nil {
		return
	}
	if ended || !follow {
		ls.end()
		return
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	every := ssePoll
	if ls.output {
		every = sseOutputPoll
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.done:
			// Lagged or shutting down: send what is stored, then end the
			// stream; the client reconnects with Last-Event-ID.
			_, _ = ls.drain()
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
		ended, err := ls.drain()
		if err != nil {
			return
		}
		if ended {
			ls.end()
			return
		}
	}
}

// cursor reads where the client resumes: Last-Event-ID ("E" or "E.O"),
// else ?after= and ?output_after=. A malformed query parameter is answered
// 400 (false); a malformed header starts from the beginning.
func (ls *logStream) cursor(w http.ResponseWriter, r *http.Request) bool {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		ev, out, _ := strings.Cut(v, ".")
		ls.after, _ = strconv.ParseUint(ev, 10, 64)
		ls.outAfter, _ = strconv.ParseUint(out, 10, 64)
		return true
	}
	for _, p := range []struct {
		name string
		to   *uint64
	}{{"after", &ls.after}, {"output_after", &ls.outAfter}} {
		v := r.URL.Query().Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fault.Invalid, p.name+" must be a sequence number")
			return false
		}
		*p.to = n
	}
	return true
}

func (ls *logStream) id() string {
	if ls.output {
		return fmt.Sprintf("%d.%d", ls.after, ls.outAfter)
	}
	return strconv.FormatUint(ls.after, 10)
}

// sendAll sends events and lines merged by time (each in its own order).
func (ls *logStream) sendAll(evs []state.Event, lines []state.OutputLine) {
	for len(evs) > 0 || len(lines) > 0 {
		if len(lines) == 0 || (len(evs) > 0 && !lines[0].Time.Before(evs[0].Time)) {
			ev := evs[0]
			evs = evs[1:]
			ls.after = ev.Seq
			b, _ := json.Marshal(ev)
			fmt.Fprintf(ls.w, "id: %s\nevent: %s\ndata: %s\n\n", ls.id(), ev.Type, b)
			continue
		}
		l := lines[0]
		lines = lines[1:]
		ls.outAfter = l.Seq
		b, _ := json.Marshal(l)
		fmt.Fprintf(ls.w, "id: %s\nevent: %s\ndata: %s\n\n", ls.id(), api.OutputEvent, b)
	}
}

// read sends what is stored after the cursor; more reports a full page.
func (ls *logStream) read() (more bool, err error) {
	ctx := ls.r.Context()
	var evs []state.Event
	var lines []state.OutputLine
	if ls.events {
		if evs, err = ls.s.store.Events(ctx, ls.runID, ls.after, ssePage); err != nil {
			return false, err
		}
	}
	if ls.output {
		f := state.OutputFilter{Step: ls.step, After: ls.outAfter, Limit: ssePage}
		if lines, err = ls.s.store.Output(ctx, ls.runID, f); err != nil {
			return false, err
		}
	}
	ls.sendAll(evs, lines)
	return len(evs) == ssePage || len(lines) == ssePage, nil
}

// drain sends every stored event (and line) after the last one sent and
// reports whether the run has ended.
func (ls *logStream) drain() (ended bool, err error) {
	for more := true; more; {
		if more, err = ls.read(); err != nil {
			return false, err
		}
	}
	ls.flusher.Flush()
	cur, err := ls.s.store.GetRun(ls.r.Context(), ls.runID)
	if err != nil {
		return false, err
	}
	if !cur.Status.Done() {
		if ended, err := ls.stepEnded(); !ended || err != nil {
			return false, err
		}
	}
	// The run (or the step followed) ended between the reads above and
	// the run read: its final events were written with the final status,
	// and its output before them or with them, so read once more before
	// the end.
	for more := true; more; {
		if more, err = ls.read(); err != nil {
			return false, err
		}
	}
	ls.flusher.Flush()
	return true, nil
}

// stepEnded reports whether the step this stream keeps to (?step=) has
// ended: its record (the for_each step's own, once its items did) says so.
func (ls *logStream) stepEnded() (bool, error) {
	if ls.step == "" {
		return false, nil
	}
	recs, err := ls.s.store.Steps(ls.r.Context(), ls.runID)
	if err != nil {
		return false, err
	}
	for _, rec := range recs {
		if rec.ID == ls.step {
			return rec.Status.Done(), nil
		}
	}
	return false, nil
}

// end sends the "end" event with the run's status (still going when the
// stream kept to a step that ended).
func (ls *logStream) end() {
	cur, _ := ls.s.store.GetRun(ls.r.Context(), ls.runID)
	if cur == nil {
		return
	}
	b, _ := json.Marshal(api.StreamEnd{Status: cur.Status})
	fmt.Fprintf(ls.w, "event: end\ndata: %s\n\n", b)
	ls.flusher.Flush()
}

// runOutput answers GET /api/v1/runs/{id}/output?step=S&after=N&limit=M:
// a page of the steps' output lines (api.OutputPage).
func (s *Server) runOutput(w http.ResponseWriter, r *http.Request) {
	run := s.runOr404(w, r)
	if run == nil {
		return
	}
	after, limit, ok := pageParams(w, r)
	if !ok {
		return
	}
	page := api.OutputPage{Lines: []state.OutputLine{}, Status: run.Status}
	lines, err := s.store.Output(r.Context(), run.ID, state.OutputFilter{Step: r.URL.Query().Get("step"), After: after, Limit: limit})
	if err != nil {
		writeErr(w, err)
		return
	}
	if lines != nil {
		page.Lines = lines
	}
	writeJSON(w, http.StatusOK, page)
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
