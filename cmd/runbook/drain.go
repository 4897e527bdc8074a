package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/api"
)

var drainVerb = &verb{
	name:    "drain",
	summary: "drain a runbook serve before stopping it for an upgrade",
	run:     cmdDrain,
}

func cmdDrain(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "drain", usage: "[--grace DURATION] [--reason TEXT] [--wait | --status] [--server URL]",
		summary: "Drain the runbook serve holding the state (or --server URL): it takes no new run, hands its parked and queued runs over, and gives the runs it executes a grace before it suspends them.",
		details: `As SIGUSR1 does (docs/ha.md, "Draining a replica"): /readyz, webhooks and
run starts answer 503, the scheduler stops, the parked and queued runs are
let go (the other replicas take them at once; a server alone on its state
keeps them for its next start), and the runs executing get --grace
(default: server.drain_grace) before they are suspended. Once nothing
executes there it says so: stop it then (SIGTERM). On replicas, name the
one to drain with --server URL. Needs server.admin; audited as
server.drain with the reason. With --wait it prints the progress until the
server is empty, and exits 0 then; without, it prints the status once.
'runbook drain --status' only prints the status.`,
	})
	grace := fs.Duration("grace", 0, "how long the runs executing may take to end before they are suspended (default: the server's server.drain_grace)")
	reason := fs.String("reason", "", "why (recorded in the audit log)")
	wait := fs.Bool("wait", false, "follow the drain until nothing executes on the server any more")
	status := fs.Bool("status", false, "only print the drain's status")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	srv, err := openServerAPI(ctx, o, "runbook drain drains a runbook serve",
		"pass --server URL (or set RUNBOOK_SERVER) to name the replica to drain")
	if err != nil {
		return err
	}
	var d api.Drain
	if *status {
		err = srv.do(ctx, http.MethodGet, "/api/v1/drain", nil, &d)
	} else {
		req := api.DrainRequest{Reason: *reason}
		if *grace > 0 {
			req.Grace = grace.String()
		}
		err = srv.do(ctx, http.MethodPost, "/api/v1/drain", req, &d)
	}
	for err == nil && *wait && !d.Empty {
		a.printDrain(d, out.json)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		err = srv.do(ctx, http.MethodGet, "/api/v1/drain", nil, &d)
	}
	if err != nil {
		return withHint(err, "")
	}
	a.printDrain(d, out.json)
	return nil
}

// printDrain prints a drain's status: a line, or its JSON.
func (a *app) printDrain(d api.Drain, asJSON bool) {
	if asJSON {
		_ = writeJSON(a.stdout, d)
		return
	}
	if !d.Draining {
		fmt.Fprintln(a.stdout, "not draining")
		return
	}
	state := "draining"
	if d.Empty {
		state = "drained: nothing executes there any more; stop it now (SIGTERM)"
	}
	fmt.Fprintf(a.stdout, "%s — executing %d, let go %d (handed over %d), suspended %d; since %s, grace %s\n",
		state, d.Executing, d.LetGo, d.HandedOver, d.Suspended, formatTime(*d.Since), d.Grace)
}
