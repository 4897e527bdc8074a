package api

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Bounds of RunQuery.Limit.
const (
	DefaultRunLimit = 100
	MaxRunLimit     = 10000
)

// RunQuery is the query of GET /api/v1/runs: which runs, from where, how
// many. ParseRunQuery reads it from a URL's query, Values writes it there.
type RunQuery struct {
	Status   []state.RunStatus // as shown (an interrupted run is not running); empty: any
	Playbook string
	Triggers []string  // trigger types (api, schedule, webhook); empty: any
	Since    time.Time // created at or after; zero: no bound
	Until    time.Time // created before; zero: no bound
	Children bool      // sub-playbook runs too
	Parent   string    // only the sub-playbook runs of this run
	Prefix   string    // only the runs whose ID starts with this
	Limit    int       // 1..MaxRunLimit; 0: DefaultRunLimit
	Before   *state.RunCursor
}

// ParseRunQuery reads a RunQuery. Statuses and trigger types may be comma
// separated or repeated; since and until are RFC 3339 times,
// 2026-11-22T09:00 (UTC) or dates. A bad value is an error that names it.
func ParseRunQuery(q url.Values) (RunQuery, error) {
	rq := RunQuery{Playbook: q.Get("playbook"), Parent: q.Get("parent"), Prefix: q.Get("prefix"),
		Children: q.Get("children") == "true", Limit: DefaultRunLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRunLimit {
			return rq, fmt.Errorf("limit must be an integer in 1..%d", MaxRunLimit)
		}
		rq.Limit = n
	}
	for _, one := range listParam(q["status"]) {
		st, err := state.ParseRunStatus(one)
		if err != nil {
			return rq, err
		}
		rq.Status = append(rq.Status, st)
	}
	rq.Triggers = listParam(q["trigger"])
	var err error
	if rq.Since, err = parseTimeParam("since", q.Get("since")); err != nil {
		return rq, err
	}
	if rq.Until, err = parseTimeParam("until", q.Get("until")); err != nil {
		return rq, err
	}
	if v := q.Get("before"); v != "" {
		if rq.Before, err = state.ParseRunCursor(v); err != nil {
			return rq, fmt.Errorf("before: %w", err)
		}
	}
	return rq, nil
}

// Values is the query as ParseRunQuery reads it.
func (rq RunQuery) Values() url.Values {
	q := url.Values{}
	if len(rq.Status) > 0 {
		ss := make([]string, len(rq.Status))
		for i, s := range rq.Status {
			ss[i] = string(s)
		}
		q.Set("status", strings.Join(ss, ","))
	}
	if len(rq.Triggers) > 0 {
		q.Set("trigger", strings.Join(rq.Triggers, ","))
	}
	for k, v := range map[string]string{"playbook": rq.Playbook, "parent": rq.Parent, "prefix": rq.Prefix} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, t := range map[string]time.Time{"since": rq.Since, "until": rq.Until} {
		if !t.IsZero() {
			q.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	if rq.Children {
		q.Set("children", "true")
	}
	if rq.Limit > 0 {
		q.Set("limit", strconv.Itoa(rq.Limit))
	}
	if rq.Before != nil {
		q.Set("before", rq.Before.String())
	}
	return q
}

// listParam splits repeated, comma separated values, empty ones left out.
func listParam(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, one := range strings.Split(v, ",") {
			if one = strings.TrimSpace(one); one != "" {
				out = append(out, one)
			}
		}
	}
	return out
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
