package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/yamlnode"
)

var auditVerb = &verb{
	name:    "audit",
	summary: "read the audit log of the API, newest first",
	run:     cmdAudit,
}

// auditPageSize is how many records one read asks for (the API's most).
const auditPageSize = 10000

func cmdAudit(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "audit", usage: "[--since DURATION|TIME] [--limit N] [--output json]",
		summary: "Print the audit log, newest first: one line per record with its time, identity, action, target, result and source address.",
		details: `Every state-changing API call (run start, cancel, approve, retry, resume,
reload, token create and revoke), allowed or denied, has a record; so do the
token changes 'runbook token' makes directly in the state (identity local:USER).
When runbook serve holds the state (or --server URL, $RUNBOOK_SERVER names one)
the log is read through its API with the admin token in the secret
RUNBOOK_API_TOKEN (a person's or the server's).`,
	})
	since := fs.String("since", "", "only records of the last `DURATION` (24h, 7d) or since TIME (2026-11-02T15:04:05Z, 2026-11-02)")
	limit := fs.Int("limit", 100, "at most `n` records, the newest (0: all)")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	from, err := parseSince(*since, time.Now())
	if err != nil {
		return usageErrorf("audit", "--since %q: %v", *since, err)
	}
	if *limit < 0 {
		return usageErrorf("audit", "--limit %d: want 0 (all) or more", *limit)
	}
	b, err := openAuth(ctx, o, false)
	if err != nil {
		return err
	}
	recs := []state.AuditRecord{}
	if b != nil {
		defer b.close()
		if recs, err = newestAudit(ctx, b, from, *limit); err != nil {
			return tokenError(err, "")
		}
	}
	if out.json {
		return writeJSON(a.stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(a.stdout, "no audit records")
		return nil
	}
	tw := newTable(a.stdout, 2)
	tw.row("TIME", "IDENTITY", "ACTION", "TARGET", "RESULT", "SOURCE")
	for _, r := range recs {
		tw.row(formatTime(r.Time), orDash(r.Identity), r.Action, orDash(r.Target), r.Result, orDash(r.Source))
	}
	return tw.flush()
}

// parseSince reads --since: a duration back from now (playbook syntax,
// with days), an RFC 3339 time or a local date. "" is the zero time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := yamlnode.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a duration (30m, 24h, 7d), an RFC 3339 time (2026-11-02T15:04:05Z) or a date (2026-11-02)")
}

// newestAudit reads the records since from and returns the newest limit
// of them (0: all), newest first. The log is read oldest first, a page at
// a time, keeping the last limit records.
func newestAudit(ctx context.Context, b authBackend, from time.Time, limit int) ([]state.AuditRecord, error) {
	var keep []state.AuditRecord
	var after uint64
	for {
		page, next, err := b.auditPage(ctx, from, after, auditPageSize)
		if err != nil {
			return nil, err
		}
		keep = append(keep, page...)
		if limit > 0 && len(keep) > limit {
			keep = slices.Clone(keep[len(keep)-limit:])
		}
		if next == 0 || len(page) == 0 {
			break
		}
		after = next
	}
	slices.Reverse(keep)
	if keep == nil {
		keep = []state.AuditRecord{}
	}
	return keep, nil
}
