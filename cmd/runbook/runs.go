package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/runbook/runbook/internal/suggest"
)

var runsVerb = &verb{
	name:    "runs",
	summary: "list, inspect, approve, cancel, retry and prune runs",
	run:     cmdRuns,
}

type subVerb struct {
	name, summary string
	run           func(ctx context.Context, a *app, args []string) error
}

func runsSubVerbs() []subVerb {
	return []subVerb{
		{"list", "list runs, newest first", cmdRunsList},
		{"show", "show a run and its steps", cmdRunsShow},
		{"logs", "print a run's event log", cmdRunsLogs},
		{"approve", "answer a waiting approval and continue the run", cmdRunsApprove},
		{"cancel", "cancel an unfinished run", cmdRunsCancel},
		{"retry", "run a failed or cancelled run again from a step", cmdRunsRetry},
		{"rerun", "start a new run of an ended run with its inputs", cmdRunsRerun},
		{"prune", "delete finished runs older than an age", cmdRunsPrune},
	}
}

func cmdRuns(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "runs",
		`Runs are read from the state file (--state, $RUNBOOK_STATE, else $XDG_STATE_HOME/runbook/state.db).
When runbook serve holds that file, every command goes through its API instead,
with the same output; --server URL (or $RUNBOOK_SERVER) names a server. The API
token is the secret RUNBOOK_API_TOKEN (environment or --secrets file).
A RUN_ID may be shortened to any prefix that no other run's ID starts with.`,
		runsSubVerbs(), args)
}

// dispatchSub runs the subcommand args[0] of `runbook group`, printing the
// group's usage (with intro, if any) for -h or when none is given.
func dispatchSub(ctx context.Context, a *app, group, intro string, subs []subVerb, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: runbook %s COMMAND [arguments]\n", group)
		fmt.Fprintln(w)
		if intro != "" {
			fmt.Fprintln(w, intro)
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Commands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Run 'runbook %s COMMAND -h' for details.\n", group)
	}
	if len(args) == 0 {
		usage(a.stderr)
		return &exitError{code: 2, err: fmt.Errorf("missing %s command", group), quiet: true}
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		if len(args) > 1 {
			for _, s := range subs {
				if s.name == args[1] {
					return s.run(ctx, a, []string{"-h"})
				}
			}
		}
		usage(a.stdout)
		return errHelpShown
	}
	names := make([]string, len(subs))
	for i, s := range subs {
		if s.name == name {
			return s.run(ctx, a, args[1:])
		}
		names[i] = s.name
	}
	msg := fmt.Sprintf("unknown %s command %q", group, name) + suggest.Hint(name, names)
	return &exitError{code: 2, err: errors.New(msg), hint: "runbook " + group + " -h"}
}
