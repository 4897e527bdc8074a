package server

import (
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
	cursor   runCursor
	visible  func(playbook string) bool // the caller may see the playbook's runs
}

// runCursor is where a page starts: after the run created at created with
// ID id (newest first). offset is the run's position in the store's list
// when the cursor was made, a hint of how many runs to read.
type runCursor struct {
	offset  int
	created time.Time
	id      string
}

func (c runCursor) String() string {
	return fmt.Sprintf("%d.%d.%s", c.offset, c.created.UnixNano(), c.id)
}

func parseCursor(s string) (runCursor, error) {
	off, rest, ok1 := strings.Cut(s, ".")
	nanos, id, ok2 := strings.Cut(rest, ".")
	o, err1 := strconv.Atoi(off)
	n, err2 := strconv.ParseInt(nanos, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || o < 0 || id == "" {
		return runCursor{}, fmt.Errorf("before %q is not a cursor from a page's next", s)
	}
	return runCursor{offset: o, created: time.Unix(0, n), id: id}, nil
}

// after reports whether r comes after the cursor in the list, newest
// first (created descending, then ID descending, the store's order).
func (c runCursor) after(r *state.Run) bool {
	if c.id == "" {
		return true
	}
	if !r.CreatedAt.Equal(c.created) {
		return r.CreatedAt.Before(c.created)
	}
	return r.ID < c.id
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
		if rq.cursor, err = parseCursor(v); err != nil {
			return rq, err
		}
	}
	return rq, nil
}

// keep reports whether a run the store listed belongs on the page.
func (rq *runQuery) keep(r *state.Run) bool {
	if (r.ParentID != "" && !rq.children) || !rq.visible(r.Playbook) {
		return false
	}
	if !rq.until.IsZero() && !r.CreatedAt.Before(rq.until) {
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

// maxPageRead caps the runs one read asks the store for before it reads
// them all.
const maxPageRead = 1 << 18

// pageRuns answers GET /api/v1/runs/page: runs newest first, filtered by
// status, playbook, trigger type and creation time, one page at a time.
// The store lists runs from the newest, so a page deep in the history
// costs a read of the runs before it (the cursor's offset says how many,
// so one read is usually enough).
func (s *Server) pageRuns(w http.ResponseWriter, r *http.Request) {
	rq, err := parseRunQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, err.Error())
		return
	}
	rq.visible = func(pb string) bool { return visible(r, pb) }
	read := rq.cursor.offset + 4*(rq.limit+1)
	for {
		f := rq.filter
		f.Limit = read
		runs, err := s.store.ListRuns(r.Context(), f)
		if err != nil {
			writeErr(w, err)
			return
		}
		exhausted := read == 0 || len(runs) < read
		page, next, complete := rq.collect(runs, exhausted)
		if complete || exhausted {
			out := api.RunPage{Runs: make([]api.Run, 0, len(page))}
			for _, run := range page {
				out.Runs = append(out.Runs, s.viewRun(run))
			}
			if next != nil {
				out.Next = next.String()
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		if read *= 4; read > maxPageRead {
			read = 0
		}
	}
}

// collect picks the page from runs (the store's list from the newest). It
// reports complete when the page is full, or ends where the list would
// only hold older runs than since; next is the cursor after the page when
// more may follow.
func (rq *runQuery) collect(runs []*state.Run, exhausted bool) (page []*state.Run, next *runCursor, complete bool) {
	for i, run := range runs {
		if !rq.cursor.after(run) {
			continue
		}
		if !rq.since.IsZero() && run.CreatedAt.Before(rq.since) {
			return page, nil, true
		}
		if !rq.keep(run) {
			continue
		}
		if len(page) == rq.limit {
			last := page[len(page)-1]
			return page, &runCursor{offset: i, created: last.CreatedAt, id: last.ID}, true
		}
		page = append(page, run)
	}
	if exhausted || len(page) < rq.limit {
		return page, nil, false
	}
	// Full, and the store may hold more: the next page says.
	last := page[len(page)-1]
	return page, &runCursor{offset: len(runs), created: last.CreatedAt, id: last.ID}, true
}
