package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// runbook pause and runbook resume: a run pause holds the runs of the
// playbooks it selects at their next step boundary, on every replica. They
// go through the API of the runbook serve holding the state (or
// --server); on a state nobody serves they write it directly, audited as
// local:$USER, and the replicas on it read it at once (their store tells
// them).

var pauseVerb = &verb{
	name:    "pause",
	summary: "pause the runs of playbooks at their next step (a change freeze); list the pauses",
	run:     cmdPause,
}

var resumeVerb = &verb{
	name:    "resume",
	summary: "lift a pause: the runs it held go on from the step that did not start",
	run:     cmdResume,
}

func cmdPause(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "list" {
		return cmdPauseList(ctx, a, args[1:])
	}
	fs := newFlagSet(a, command{
		name: "pause", usage: "PATTERN|--label k=v --reason TEXT [flags] | pause list",
		summary: "Pause the runs of the playbooks a name pattern (nks-*) or a label selects: no step of theirs starts until 'runbook resume'.",
		details: `The steps executing finish (never interrupted); then each run parks with
the reason ('runbook runs show' says "paused by you: REASON"), holding no
execution slot, and keeps its concurrency key. New runs of a paused playbook
(webhooks, schedules, the API) are accepted and recorded, and park before
their first step. Approvals waiting can still be answered; the step after
them does not start. The pause is kept in the state, so every replica holds
it and it outlives restarts. One pause per selector; 'runbook pause list'
shows them with their IDs, 'runbook resume ID|PATTERN' lifts one. Needs the
permission runs.pause (operator, admin); audited. A playbook named "list" is
paused with the pattern [l]ist.`,
	})
	label := fs.String("label", "", "pause the playbooks with this label (`k=v`) instead of a name pattern")
	reason := fs.String("reason", "", "why (required: every run it holds shows it)")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := selectorArgs(fs, pos, *label, "a playbook name PATTERN, or --label k=v"); err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usageErrorf(fs.Name(), "--reason is required: say why the runs are paused (every run it holds shows it)")
	}
	req := api.PauseRequest{Label: *label, Reason: strings.TrimSpace(*reason)}
	if len(pos) == 1 {
		req.Pattern = pos[0]
	}
	var ans api.PauseAnswer
	err = withPauses(ctx, o, func(b *apiBackend) error {
		return b.do(ctx, http.MethodPost, "/api/v1/pauses", req, &ans)
	}, func(st state.Store) error {
		ans.Pause.RunPause, err = pauseInState(ctx, st, req)
		return err
	})
	if err != nil {
		return withHint(err, "runbook pause list")
	}
	if out.json {
		return writeJSON(a.stdout, ans)
	}
	fmt.Fprintf(a.stdout, "paused the runs of %s (pause %s): %s\n", ans.Pause.Selector(), ans.Pause.ID, ans.Pause.Reason)
	if ans.Pause.Playbooks != nil {
		fmt.Fprintf(a.stdout, "  playbooks it selects now: %s\n", orDash(strings.Join(ans.Pause.Playbooks, ", ")))
	}
	fmt.Fprintf(a.stdout, "  lift it with: runbook resume %s\n", ans.Pause.ID)
	return nil
}

func cmdPauseList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "pause list", usage: "[flags]",
		summary: "List the run pauses: ID, what each selects, who paused and why.",
	})
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	list, err := listPauses(ctx, o)
	if err != nil {
		return withHint(err, "")
	}
	if out.json {
		return writeJSON(a.stdout, list)
	}
	if len(list.Pauses) == 0 {
		fmt.Fprintln(a.stdout, "no pauses: every playbook's runs go on")
		return nil
	}
	tw := newTable(a.stdout, 2)
	tw.row("ID", "SELECTS", "PLAYBOOKS", "BY", "SINCE", "REASON")
	for _, p := range list.Pauses {
		pbs := "-"
		if p.Playbooks != nil {
			pbs = orDash(strings.Join(p.Playbooks, ","))
		}
		tw.row(p.ID, p.Selector(), pbs, p.By, formatTime(p.At), p.Reason)
	}
	return tw.flush()
}

func cmdResume(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "resume", usage: "ID|PATTERN|--label k=v [flags]",
		summary: "Lift a run pause: every run it held, on any replica, goes on at once from the step that did not start.",
		details: `Names the pause by its ID ('runbook pause list'), or by the pattern or label
it was made with. The runs it held are woken wherever they are parked, and
each queues for an execution slot like any run; no step runs twice. A run
that another pause still selects stays parked. Needs the permission
runs.pause; audited.`,
	})
	label := fs.String("label", "", "the pause made with --label `k=v`")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := selectorArgs(fs, pos, *label, "the pause's ID or PATTERN, or --label k=v"); err != nil {
		return err
	}
	list, err := listPauses(ctx, o)
	if err != nil {
		return withHint(err, "")
	}
	var id string
	for _, p := range list.Pauses {
		if (*label != "" && p.Label == *label) || (len(pos) == 1 && (p.ID == pos[0] || p.Pattern == pos[0])) {
			id = p.ID
		}
	}
	if id == "" {
		what := "--label " + *label
		if len(pos) == 1 {
			what = pos[0]
		}
		return withHint(&fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("no pause is %s (neither an ID nor the selector of one)", what)}, "runbook pause list")
	}
	var ans api.PauseAnswer
	err = withPauses(ctx, o, func(b *apiBackend) error {
		return b.do(ctx, http.MethodDelete, "/api/v1/pauses/"+url.PathEscape(id), nil, &ans)
	}, func(st state.Store) error {
		ans.Pause.RunPause, err = resumeInState(ctx, st, id)
		return err
	})
	if err != nil {
		return withHint(err, "runbook pause list")
	}
	if out.json {
		return writeJSON(a.stdout, ans)
	}
	fmt.Fprintf(a.stdout, "resumed the runs of %s (pause %s, paused by %s since %s: %s); the runs it held go on\n",
		ans.Pause.Selector(), ans.Pause.ID, ans.Pause.By, formatTime(ans.Pause.At), ans.Pause.Reason)
	return nil
}

// withPauses calls viaAPI with the API of the runbook serve holding the
// state, else inState with the state itself.
func withPauses(ctx context.Context, o *runsOpener, viaAPI func(*apiBackend) error, inState func(state.Store) error) error {
	b, err := o.open(ctx)
	if err != nil {
		return err
	}
	switch b := b.(type) {
	case *apiBackend:
		return viaAPI(b)
	case *storeBackend:
		defer b.close()
		return inState(b.store)
	}
	st, err := o.sf.openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	return inState(st)
}

// listPauses reads the pauses through the server, or from the state.
func listPauses(ctx context.Context, o *runsOpener) (api.PauseList, error) {
	list := api.PauseList{Pauses: []api.Pause{}}
	err := withPauses(ctx, o, func(b *apiBackend) error {
		return b.do(ctx, http.MethodGet, "/api/v1/pauses", nil, &list)
	}, func(st state.Store) error {
		rules, err := st.RunPauses(ctx)
		for _, p := range rules {
			list.Pauses = append(list.Pauses, api.Pause{RunPause: p})
		}
		return err
	})
	return list, err
}

// pauseInState records a pause on a state nobody serves, audited as the
// API audits it.
func pauseInState(ctx context.Context, st state.Store, req api.PauseRequest) (state.RunPause, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := state.RunPause{ID: "p" + hex.EncodeToString(b), Pattern: req.Pattern, Label: req.Label, Reason: req.Reason, By: localName(), At: time.Now().UTC()}
	err := p.Check()
	if err != nil {
		err = &fault.Error{Code: fault.Invalid, Message: err.Error()}
	} else if err = st.PauseRuns(ctx, p); errors.Is(err, state.ErrExists) {
		err = &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("the runs of %s are paused already: one pause per selector", p.Selector())}
	}
	return p, auditLocal(ctx, st, "runs.pause", p, err)
}

// resumeInState lifts pause id on a state nobody serves (the replicas on
// it wake their runs when the store tells them), audited.
func resumeInState(ctx context.Context, st state.Store, id string) (state.RunPause, error) {
	p, err := st.ResumeRuns(ctx, id)
	if p == nil {
		p = &state.RunPause{ID: id}
	}
	return *p, auditLocal(ctx, st, "runs.unpause", *p, err)
}

// auditLocal appends the audit record of a pause or resume made on the
// state, and returns err (or the audit's failure).
func auditLocal(ctx context.Context, st state.Store, action string, p state.RunPause, err error) error {
	result := "ok"
	if err != nil {
		result = string(fault.CodeOf(err))
	}
	rec := state.AuditRecord{Identity: localName(), Action: action, Target: "pause:" + p.ID, Result: result, Source: "local",
		Detail: map[string]any{"selector": p.Selector(), "reason": p.Reason}}
	if aerr := st.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil && err == nil {
		err = fmt.Errorf("%s %s done, but its audit record was not written: %w", action, p.ID, aerr)
	}
	return err
}

// selectorArgs checks the arguments of a verb that takes one PATTERN (or
// ID), or none with --label.
func selectorArgs(fs *flag.FlagSet, pos []string, label, what string) error {
	want := 1
	if label != "" {
		want = 0
	}
	return wantArgs(fs, pos, want, want, what)
}
