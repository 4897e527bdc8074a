package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// runQuery is a parsed GET /api/v1/runs/page.
type runQuery struct {
	filter   state.RunFilter // status and playbook: what the store filters
	triggers []string        // trigger types; empty: any
	since    time.Time       // created at or after; zero: no bound
	until    time.Time       // created before; zero: no bound
	children bool
	limit    int
	cursor   *state.RunCursor           // the page starts after it; nil: at the newest
	visible  func(playbook string) bool // the caller may see the playbook's runs
}

// start is where the store's listing starts: after the cursor, or before
// until, whichever comes later in the listing (newest first).
func (rq *runQuery) start() *state.RunCursor {
	if rq.until.IsZero() {
		return rq.cursor
	}
	until := state.CursorBefore(rq.until)
	if rq.cursor == nil || rq.cursor.Follows(&state.Run{CreatedAt: until.CreatedAt, ID: until.ID}) {
		return until
	}
	return rq.cursor
}

// parseTimeParam reads an RFC 3339 time, or a date (midnight UTC).
func parseTimeParam(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q is not a time (2026-11-22T09:00:00Z, or a date 2026-11-22)", name, v)
}

func parseRunQuery(r *http.Request) (runQuery, error) {
	q := r.URL.Query()
	rq := runQuery{filter: state.RunFilter{Playbook: q.Get("playbook")}, limit: 50, children: q.Get("children") == "true"}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return rq, fmt.Errorf("limit must be an integer in 1..1000")
		}
		rq.limit = n
	}
	for _, st := range q["status"] {
		for _, one := range strings.Split(st, ",") {
			if one = strings.TrimSpace(one); one == "" {
				continue
			}
			rs := state.RunStatus(one)
			if !validStatus(rs) {
				return rq, fmt.Errorf("unknown status %q (pending, running, waiting, succeeded, failed, cancelled, skipped)", one)
			}
			rq.filter.Status = append(rq.filter.Status, rs)
		}
	}
	for _, tr := range q["trigger"] {
		for _, one := range strings.Split(tr, ",") {
			if one = strings.TrimSpace(one); one != "" {
				rq.triggers = append(rq.triggers, one)
			}
		}
	}
	var err error
	if rq.since, err = parseTimeParam("since", q.Get("since")); err != nil {
		return rq, err
	}
	if rq.until, err = parseTimeParam("until", q.Get("until")); err != nil {
		return rq, err
	}
	if v := q.Get("before"); v != "" {
		if rq.cursor, err = state.ParseRunCursor(v); err != nil {
			return rq, fmt.Errorf("before: %w", err)
		}
	}
	return rq, nil
}

// keep reports whether a run the store listed belongs on the page.
func (rq *runQuery) keep(r *state.Run) bool {
	if (r.ParentID != "" && !rq.children) || !rq.visible(r.Playbook) {
		return false
	}
	if len(rq.triggers) > 0 {
		typ, _ := r.Trigger["type"].(string)
		found := false
		for _, t := range rq.triggers {
			found = found || t == typ
		}
		return found
	}
	return true
}

// maxChunk caps how many runs one read asks the store for.
const maxChunk = 4096

// pageRuns answers GET /api/v1/runs/page: runs newest first, filtered by
// status, playbook, trigger type and creation time, one page at a time.
// The store lists runs from the cursor (keyset paging, state.RunFilter's
// Before), so a page deep in the history costs what the first does.
func (s *Server) pageRuns(w http.ResponseWriter, r *http.Request) {
	rq, err := parseRunQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, err.Error())
		return
	}
	rq.visible = func(pb string) bool { return visible(r, pb) }
	page, next, err := rq.read(r.Context(), s.store)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.RunPage{Runs: make([]api.Run, 0, len(page))}
	for _, run := range page {
		out.Runs = append(out.Runs, s.viewRun(run))
	}
	if next != nil {
		out.Next = next.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// read reads the page from the store, in chunks from the query's start
// (what the store filters, it filters; the rest is dropped here). next is
// the cursor after the page when another run follows it, nil when the page
// is the last; the listing stops at the first run created before since.
func (rq *runQuery) read(ctx context.Context, store state.Store) (page []*state.Run, next *state.RunCursor, err error) {
	f := rq.filter
	f.Before = rq.start()
	f.Limit = rq.limit + 1
	for {
		runs, err := store.ListRuns(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		for _, run := range runs {
			if !rq.since.IsZero() && run.CreatedAt.Before(rq.since) {
				return page, nil, nil
			}
			if !rq.keep(run) {
				continue
			}
			if len(page) == rq.limit {
				return page, state.CursorAfter(page[len(page)-1]), nil
			}
			page = append(page, run)
		}
		if len(runs) < f.Limit {
			return page, nil, nil
		}
		f.Before = state.CursorAfter(runs[len(runs)-1])
		f.Limit = min(4*f.Limit, maxChunk)
	}
}
