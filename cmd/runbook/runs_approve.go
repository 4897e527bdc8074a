package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

func cmdRunsApprove(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs approve", usage: "RUN_ID STEP [--reject] [--comment text] [--by name] [--field key=value ...]",
		summary: "Answer a waiting approval, then continue the run here with the same progress output as 'runbook run'.",
		details: `--field values are JSON when they parse as JSON, strings otherwise.
An approval whose fields do not fit the step's declared fields (one left
out, a wrong type, an unknown name) is refused with exit code 2 and every
problem listed; nothing is recorded and the run keeps waiting. Only
--reject fails the step.
With --no-resume the answer is only recorded; continue later with
'runbook run --resume RUN_ID'. When runbook serve holds the state file the
answer goes through its API and the server continues the run; the progress
shown is the server's, until the run ends or waits again.`,
	})
	reject := fs.Bool("reject", false, "reject instead of approving")
	comment := fs.String("comment", "", "a `comment` recorded with the answer")
	by := fs.String("by", "", "`name` of who answers (default: the identity of a person's token in $RUNBOOK_API_TOKEN for a server, else $USER or the login name); recorded with the answer")
	var fields kvList
	fs.Var(&fields, "field", "response field `key=value` (repeatable)")
	noResume := fs.Bool("no-resume", false, "record the answer without continuing the run (with a server: do not wait for it)")
	out := addOutputFlag(fs, "text")
	quiet := fs.Bool("quiet", false, "no progress: print only the outcome")
	o := newRunsOpener(a, fs)
	var sims simFlags
	sims.add(fs)
	var cfgPath string
	runConfigFlag(fs, &cfgPath)
	pos, err := parsePositional(fs, args, 2, 2, "RUN_ID and STEP")
	if err != nil {
		return err
	}
	runID, step := pos[0], pos[1]
	answer := state.Approval{Approved: !*reject, By: *by, Comment: *comment}
	for i, k := range fields.keys {
		v, err := jsonValue(fields.vals[i])
		if err != nil {
			return usageErrorf("runs approve", "--field %s: %v", k, err)
		}
		if answer.Fields == nil {
			answer.Fields = map[string]any{}
		}
		answer.Fields[k] = v
	}
	verdict := "approved"
	if *reject {
		verdict = "rejected"
	}
	b, runID, err := o.openForRun(ctx, runID)
	if err != nil {
		return err
	}
	defer b.close()
	r, err := b.get(ctx, runID)
	if err != nil {
		return err
	}
	if api, ok := b.(*apiBackend); ok {
		if answer.By == "" && !api.personal(ctx) {
			answer.By = currentUser()
		}
		return a.approveRemote(ctx, api, r, step, answer, verdict, *noResume, out, *quiet)
	}
	store := b.(*storeBackend).store
	if answer.By == "" {
		answer.By = currentUser()
	}
	root := rootRun(ctx, store.GetRun, r)
	var p progress = nopProgress{}
	if !*noResume {
		p = a.newProgress(out, *quiet, root.ID)
	}
	host, closeHost, err := a.hostHere(ctx, store, root.ID, cfgPath, o, &sims, engine.Observer{Event: p.observe})
	if err != nil {
		p.close()
		return err
	}
	defer closeHost()
	if err := host.Approve(ctx, runID, step, answer); err != nil {
		p.close()
		return withHint(err, "runbook runs show "+runID)
	}
	if *noResume {
		fmt.Fprintf(a.stdout, "step %s of run %s %s; continue with: runbook run --resume %s\n", step, runID, verdict, root.ID)
		return nil
	}
	err = host.Continue(ctx, root.ID, nil)
	owner, elsewhere := fencedOwner(err), errors.Is(err, state.ErrFenced)
	if !elsewhere {
		owner, elsewhere = wentOnElsewhere(ctx, store, root.ID, host, err)
	}
	if elsewhere {
		// Another process executes the run (a replica, a runbook run
		// waiting for the answer): it continues it, or went on with it
		// already.
		p.close()
		who := "another process"
		if owner != "" {
			who = ownerKind(ctx, store, owner)
		}
		fmt.Fprintf(a.stdout, "step %s of run %s %s; %s executes run %s and continues it: runbook runs logs -f %s\n", step, runID, verdict, who, root.ID, root.ID)
		return nil
	}
	if err != nil {
		p.close()
		return withHint(err, "runbook runs show "+root.ID)
	}
	return a.followHere(ctx, store, host, root.ID, p, out)
}

// wentOnElsewhere reports whether err, the refusal to continue run runID
// here, is because another process, owner, went on with it after the
// answer was recorded: the run is owned by another process, or ended
// there.
func wentOnElsewhere(ctx context.Context, store state.Store, runID string, host *runner.Host, err error) (owner string, ok bool) {
	if err == nil || fault.CodeOf(err) != fault.Conflict {
		return "", false
	}
	r, gerr := store.GetRun(ctx, runID)
	if gerr != nil || r.Owner == "" || r.Owner == host.Engine().Process() {
		return "", false
	}
	return r.Owner, true
}

// currentUser names who runs the command: $USER, else the login name of
// the process's user, else its uid. Never empty: every answer is recorded
// with who gave it.
func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// rootRun follows ParentID links to the top-level run, reading each with
// get (a store's GetRun, the server's API): resuming it resumes its
// sub-playbook runs.
func rootRun(ctx context.Context, get func(context.Context, string) (*state.Run, error), r *state.Run) *state.Run {
	for range 16 {
		if r.ParentID == "" {
			return r
		}
		p, err := get(ctx, r.ParentID)
		if err != nil {
			return r
		}
		r = p
	}
	return r
}
