package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// statusList is --status: comma separated, repeatable.
type statusList []state.RunStatus

func (l *statusList) String() string { return "" }

func (l *statusList) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		st, err := state.ParseRunStatus(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		*l = append(*l, st)
	}
	return nil
}

func cmdRunsList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs list", usage: "[--status s] [--playbook name] [--limit n] [--output json]",
		summary: "List runs, newest first.",
	})
	var status statusList
	fs.Var(&status, "status", "only runs with this `status` (comma separated or repeated)")
	pbName := fs.String("playbook", "", "only runs of this playbook `name`")
	limit := fs.Int("limit", 20, "at most `n` runs (0: all)")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	b, err := o.open(ctx)
	if err != nil {
		return err
	}
	var runs []*state.Run
	if b != nil {
		defer b.close()
		f := state.RunFilter{Status: status, Playbook: *pbName, Limit: *limit}
		if f.Limit > 0 {
			f.Limit++ // one more tells whether the list stops short
		}
		runs, err = b.list(ctx, f)
		if err != nil {
			return withHint(err, "")
		}
	}
	more := *limit > 0 && len(runs) > *limit
	if more {
		runs = runs[:*limit]
	}
	if out.json {
		list := make([]*state.Run, len(runs))
		for i, r := range runs {
			cp := *r
			cp.Snapshot = nil
			list[i] = &cp
		}
		return writeJSON(a.stdout, list)
	}
	if len(runs) == 0 {
		fmt.Fprintln(a.stdout, "no runs")
		return nil
	}
	tw := newTable(a.stdout, 2)
	tw.row("RUN", "PLAYBOOK", "STATUS", "STARTED", "DURATION", "ERROR")
	for _, r := range runs {
		errText := ""
		if r.Error != nil {
			errText = oneLine(r.Error.Message, 60)
		}
		status := string(r.Status)
		if r.Status == state.RunWaiting && r.Paused != "" {
			status += " (paused)" // runbook runs show says by whom and why
		}
		tw.row(r.ID, r.Playbook, status, formatTime(startOf(r)), runDuration(r), errText)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if more {
		// On stderr: a script reading the table gets the rows only.
		fmt.Fprintf(a.stderr, "showing the newest %s; more match (--limit 0 for all)\n", plural(*limit, "run"))
	}
	return nil
}

func startOf(r *state.Run) time.Time {
	if !r.StartedAt.IsZero() {
		return r.StartedAt
	}
	return r.CreatedAt
}

func runDuration(r *state.Run) string {
	switch {
	case r.StartedAt.IsZero(), r.Status == state.RunInterrupted:
		return "-"
	case r.EndedAt.IsZero():
		return formatDuration(time.Since(r.StartedAt)) + "…"
	}
	return formatDuration(r.EndedAt.Sub(r.StartedAt))
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
