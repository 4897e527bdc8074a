package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// logItem is one entry of a run's log as `runs logs` prints it: an event
// or a line a step printed.
type logItem struct {
	ev   *state.Event
	line *state.OutputLine
}

// logQuery says what `runs logs` reads: the run's events, its steps'
// output (of step only, when set), once or until the run ends.
type logQuery struct {
	events, output bool
	step           string
	follow         bool
}

// logReader is a runs backend that reads steps' output: the state file,
// or the API (a server's or a running run's socket).
type logReader interface {
	// readLog calls each for every item q selects, in order, until each
	// returns false or, with q.follow, until the run ends.
	readLog(ctx context.Context, id string, q logQuery, each func(logItem) bool) error
}

var (
	_ logReader = (*storeBackend)(nil)
	_ logReader = (*apiBackend)(nil)
)

// logPoll is how often readLog reads a store again while it follows a run
// that another process executes (a database shared with servers).
const logPoll = 250 * time.Millisecond

// logPage is how many lines readLog reads from a store at once: the
// memory of runs logs stays bounded whatever a step printed.
const logPage = 5000

// readLog reads the store, the lines a page at a time; while following,
// again every logPoll until the run has ended and everything after it was
// read.
func (b *storeBackend) readLog(ctx context.Context, id string, q logQuery, each func(logItem) bool) error {
	var after, outAfter uint64
	for {
		r, err := b.store.GetRun(ctx, id)
		if err != nil {
			return err
		}
		var evs []state.Event
		if q.events {
			if evs, err = b.store.Events(ctx, id, after, 0); err != nil {
				return err
			}
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
		}
		for more := q.output; more; {
			lines, err := b.store.Output(ctx, id, state.OutputFilter{Step: q.step, After: outAfter, Limit: logPage})
			if err != nil {
				return err
			}
			more = len(lines) == logPage
			if len(lines) > 0 {
				outAfter = lines[len(lines)-1].Seq
			}
			// The events up to this page's last line go with it; the rest
			// wait for the next page.
			n := len(evs)
			if more {
				last := lines[len(lines)-1].Time
				n = 0
				for n < len(evs) && !evs[n].Time.After(last) {
					n++
				}
			}
			if !mergeLog(evs[:n], lines, each) {
				return nil
			}
			evs = evs[n:]
		}
		if !mergeLog(evs, nil, each) || !q.follow || r.Status.Done() || r.Status == state.RunWaiting {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(logPoll):
		}
	}
}

// mergeLog calls each for events and lines merged by time, each kept in
// its own order; false when each stopped.
func mergeLog(evs []state.Event, lines []state.OutputLine, each func(logItem) bool) bool {
	for len(evs) > 0 || len(lines) > 0 {
		var it logItem
		if len(lines) == 0 || (len(evs) > 0 && !lines[0].Time.Before(evs[0].Time)) {
			it.ev, evs = &evs[0], evs[1:]
		} else {
			it.line, lines = &lines[0], lines[1:]
		}
		if !each(it) {
			return false
		}
	}
	return true
}

// readLog reads the API's stream of the run's log
// (GET /api/v1/runs/{id}/logs?output=true), reconnecting from the last
// item it got when the connection drops.
func (b *apiBackend) readLog(ctx context.Context, id string, q logQuery, each func(logItem) bool) error {
	cursor, failures := "", 0
	for {
		stop, err := b.logStream(ctx, id, q, &cursor, each)
		switch {
		case stop:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			var fe *fault.Error
			if errors.As(err, &fe) && fe.Code != fault.Unavailable {
				return err
			}
			if failures++; failures >= 5 {
				return err
			}
		default:
			failures = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(failures) * 300 * time.Millisecond):
		}
	}
}

// logStream reads one connection of the stream; stop reports that the
// stream ended (the run ended, or it was not followed) or each asked to
// stop. cursor is the last event id received ("E.O").
func (b *apiBackend) logStream(ctx context.Context, id string, q logQuery, cursor *string, each func(logItem) bool) (stop bool, err error) {
	v := url.Values{"output": {strconv.FormatBool(q.output)}, "follow": {strconv.FormatBool(q.follow)}}
	if !q.output {
		v.Del("output")
	}
	if !q.events {
		v.Set("events", "false")
	}
	if q.step != "" {
		v.Set("step", q.step)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/api/v1/runs/"+url.PathEscape(id)+"/logs?"+v.Encode(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Accept", "text/event-stream")
	if *cursor != "" {
		req.Header.Set("Last-Event-ID", *cursor)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return false, &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("%s: %v", b.base, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, b.answerError(resp)
	}
	ended := false
	stopped, err := readSSE(resp.Body, func(ev sseEvent) (bool, error) {
		if ev.typ == "end" {
			ended = true
			return false, nil
		}
		var it logItem
		var err error
		if ev.typ == api.OutputEvent {
			it.line = &state.OutputLine{}
			err = json.Unmarshal([]byte(ev.data), it.line)
		} else {
			it.ev = &state.Event{}
			err = json.Unmarshal([]byte(ev.data), it.ev)
		}
		if err != nil {
			return false, fmt.Errorf("decode the log of run %s: %w", id, err)
		}
		*cursor = ev.id
		return each(it), nil
	})
	switch {
	case stopped && err != nil && !ended:
		return false, err
	case stopped:
		return true, nil
	case err != nil:
		return false, &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf("%s: %v", b.base, err)}
	}
	// Not followed: the server sent what it has and closed.
	return !q.follow, nil
}

func (nopProgress) output(string, []state.OutputLine) {}
