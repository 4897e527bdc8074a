package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/runbook/runbook/internal/state"
)

func cmdRunsLogs(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs logs", usage: "RUN_ID [-f] [--output json]",
		summary: "Print a run's event log: step transitions, retries, approvals and the steps' log lines.",
		details: `With -f and a runbook serve holding the state file, new events print as
they happen until the run ends. Without a server nothing executes the
run, so -f prints the log and returns. With --output json, -f prints one
event per line instead of an array.`,
	})
	follow := fs.Bool("f", false, "follow: print new events until the run ends")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, 1, "the RUN_ID (runbook runs list shows them)"); err != nil {
		return err
	}
	b, id, err := o.openForRun(ctx, pos[0])
	if err != nil {
		return err
	}
	defer b.close()
	r, err := b.get(ctx, id)
	if err != nil {
		return err
	}
	if *follow {
		return a.followLogs(ctx, b, r, out)
	}
	evs, err := b.events(ctx, r.ID, 0)
	if err != nil {
		return withHint(err, "")
	}
	if out.json {
		if evs == nil {
			evs = []state.Event{}
		}
		return writeJSON(a.stdout, evs)
	}
	var sb strings.Builder
	for _, ev := range evs {
		sb.WriteString(formatEvent(ev, "", r.ID))
		sb.WriteByte('\n')
	}
	_, err = io.WriteString(a.stdout, sb.String())
	return err
}

// followLogs prints a run's events one per line, then, through a server,
// every new one until the run ends.
func (a *app) followLogs(ctx context.Context, b runsBackend, r *state.Run, out *outputFlag) error {
	var werr error
	emit := func(ev state.Event) bool {
		if out.json {
			werr = json.NewEncoder(a.stdout).Encode(ev)
		} else {
			_, werr = io.WriteString(a.stdout, formatEvent(ev, "", r.ID)+"\n")
		}
		return werr == nil
	}
	api, ok := b.(*apiBackend)
	if !ok {
		evs, err := b.events(ctx, r.ID, 0)
		if err != nil {
			return withHint(err, "")
		}
		for _, ev := range evs {
			if !emit(ev) {
				break
			}
		}
		return werr
	}
	if _, err := api.follow(ctx, r.ID, 0, emit); err != nil && ctx.Err() == nil {
		return withHint(err, "runbook runs logs "+r.ID)
	}
	return werr
}
