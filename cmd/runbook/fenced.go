package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

// exitTakenOver is the exit code of a command that stopped executing a
// run, or did not start, because another process owns it: a replica of
// runbook serve took it over (this process's lease lapsed: a laptop
// asleep, a network cut), or another process executes it. The run goes on there;
// nothing more of it was executed or written here.
const exitTakenOver = 3

// ownerKind names owner for a message: a replica of runbook serve, or a
// process (another runbook run).
func ownerKind(ctx context.Context, store state.Store, owner string) string {
	if c, ok := store.(state.Coordinator); ok {
		if kind, _, err := c.Replica(ctx, owner); err == nil && kind == state.ReplicaServe {
			return "replica " + owner
		}
	}
	return "process " + owner
}

// fencedOwner returns the process that owns the run a write or claim
// was refused for, as err (a state.FencedError) names it; "" when err
// names none.
func fencedOwner(err error) string {
	var fe *state.FencedError
	if errors.As(err, &fe) {
		return fe.Owner
	}
	return ""
}

// notOwned reports run runID, which another process owns (err, a
// state.ErrFenced): a write of this process was refused or the run was
// found claimed when its lease was renewed (host: the run host that
// executed it, whose lease lapsing is how a replica could take the run),
// or, with host nil, its claim before executing the run was refused. What
// this process did not execute goes on there. With JSON output the run's
// record as it is now is printed.
func (a *app) notOwned(ctx context.Context, store state.Store, runID string, err error, host *runner.Host, out *outputFlag) error {
	owner := fencedOwner(err)
	msg := fmt.Sprintf("run %s stopped here: this process no longer owns it (%v); see: runbook runs show %s", runID, err, runID)
	switch {
	case owner == "":
	case host == nil:
		msg = fmt.Sprintf("run %s is executed by %s; it goes on there: runbook runs show %s",
			runID, ownerKind(ctx, store, owner), runID)
	default:
		how := ""
		if host.LeaseLapsed() {
			how = " while this process could not renew its lease"
		}
		msg = fmt.Sprintf("run %s was taken over by %s%s; it goes on there: runbook runs show %s",
			runID, ownerKind(ctx, store, owner), how, runID)
	}
	if out != nil && out.json {
		if r, gerr := store.GetRun(ctx, runID); gerr == nil {
			if doc, derr := runDoc(ctx, store, r); derr == nil {
				_ = writeJSON(a.stdout, doc)
			}
		}
		fmt.Fprintln(a.stderr, a.redactor.String(msg))
	} else {
		fmt.Fprintln(a.stdout, a.redactor.String(msg))
	}
	return &exitError{code: exitTakenOver, err: err, quiet: true}
}
