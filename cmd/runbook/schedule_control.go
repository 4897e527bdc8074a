package main

import (
	"context"
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

// The controls of a playbook's schedules. They go through the API of the
// runbook serve holding the state (or --server); a pause or resume is
// also written to a state nobody serves, audited as local:$USER.

// triggerFlag is --trigger: the index of a schedule trigger, or none.
type triggerFlag struct {
	set bool
	i   int
}

func (f *triggerFlag) String() string {
	if !f.set {
		return ""
	}
	return fmt.Sprint(f.i)
}

func (f *triggerFlag) Set(v string) error {
	_, err := fmt.Sscan(v, &f.i)
	if err != nil || f.i < 0 {
		return fmt.Errorf("want the index of a schedule trigger in the playbook's triggers: 0, 1, ...")
	}
	f.set = true
	return nil
}

func (f *triggerFlag) ptr() *int {
	if !f.set {
		return nil
	}
	return &f.i
}

func addTriggerFlag(fs *flag.FlagSet, what string) *triggerFlag {
	f := &triggerFlag{}
	fs.Var(f, "trigger", what)
	return f
}

func playbookPath(name, action string) string {
	return "/api/v1/playbooks/" + url.PathEscape(name) + "/schedules/" + action
}

// openScheduleAPI opens the API that runs and backfills go through.
func openScheduleAPI(ctx context.Context, o *runsOpener, verb string) (*apiBackend, error) {
	return openServerAPI(ctx, o, fmt.Sprintf("runbook schedule %s starts runs through runbook serve", verb),
		"start runbook serve, or pass --server URL (or set RUNBOOK_SERVER)")
}

// openServerAPI opens the API of the runbook serve holding the state (or
// --server URL) for a verb that only a server can do: what says what it
// does there, hint what to do when no server holds the state.
func openServerAPI(ctx context.Context, o *runsOpener, what, hint string) (*apiBackend, error) {
	b, err := o.open(ctx)
	if err != nil {
		return nil, err
	}
	if api, ok := b.(*apiBackend); ok {
		return api, nil
	}
	if b != nil {
		b.close()
	}
	return nil, &exitError{code: 1, err: fmt.Errorf("%s, and none holds the state", what), hint: hint}
}

func cmdSchedulePause(ctx context.Context, a *app, args []string) error {
	return schedulePauseOrResume(ctx, a, args, true)
}

func cmdScheduleResume(ctx context.Context, a *app, args []string) error {
	return schedulePauseOrResume(ctx, a, args, false)
}

func schedulePauseOrResume(ctx context.Context, a *app, args []string, pause bool) error {
	c := command{
		name: "schedule pause", usage: "PLAYBOOK [--trigger i] --reason TEXT [flags]",
		summary: "Pause a playbook's schedule triggers (or one): each slot that comes is skipped, with the reason.",
		details: `The pause is kept in the state, so every replica's scheduler sees it from
its next slot on, and it outlives restarts. Each skipped slot shows in
'runbook schedule status' with who paused it and why. After 'runbook schedule
resume', the slots that passed meanwhile follow the trigger's catchup policy
(none, latest, all within catchup_window); 'runbook schedule backfill' starts
the others. Without --trigger every schedule trigger of the playbook is
paused; a trigger's own pause and a pause of every trigger are resumed each
by its own resume. Audited (runbook audit).`,
	}
	if !pause {
		c = command{
			name: "schedule resume", usage: "PLAYBOOK [--trigger i] [--reason TEXT] [flags]",
			summary: "Lift a pause of a playbook's schedule triggers; the slots missed meanwhile follow the catchup policy.",
			details: `Lifts the pause 'runbook schedule pause' recorded for the same --trigger
(none: the pause of every trigger). The scheduler then treats the slots that
passed during the pause as missed slots: its catchup policy decides which
fire at once. Audited (runbook audit), with --reason when given.`,
		}
	}
	fs := newFlagSet(a, c)
	trig := addTriggerFlag(fs, "only the schedule trigger at this `index` of the playbook's triggers (default: every one)")
	reason := fs.String("reason", "", "why (required for a pause: shown beside each skipped slot)")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the PLAYBOOK name")
	if err != nil {
		return err
	}
	if pause && strings.TrimSpace(*reason) == "" {
		return usageErrorf(fs.Name(), "--reason is required: say why the schedules are paused (it is shown beside each skipped slot)")
	}
	b, err := o.open(ctx)
	if err != nil {
		return err
	}
	var ans api.SchedulePauseAnswer
	switch b := b.(type) {
	case *apiBackend:
		action := "resume"
		if pause {
			action = "pause"
		}
		err = b.do(ctx, http.MethodPost, playbookPath(pos[0], action), api.ScheduleControl{Trigger: trig.ptr(), Reason: *reason}, &ans)
	case *storeBackend:
		defer b.close()
		ans, err = pauseInStore(ctx, b.store, pos[0], trig, strings.TrimSpace(*reason), pause)
	default: // no state yet
		st, oerr := o.sf.openStore()
		if oerr != nil {
			return oerr
		}
		defer st.Close()
		ans, err = pauseInStore(ctx, st, pos[0], trig, strings.TrimSpace(*reason), pause)
	}
	if err != nil {
		return withHint(err, "runbook schedule status "+pos[0])
	}
	if out.json {
		return writeJSON(a.stdout, ans)
	}
	which := "every schedule trigger"
	if ans.Pause.Trigger != state.AllTriggers {
		which = fmt.Sprintf("schedule trigger %d", ans.Pause.Trigger)
	}
	if pause {
		fmt.Fprintf(a.stdout, "paused %s of %s: %s\n", which, pos[0], ans.Pause.Reason)
		return nil
	}
	fmt.Fprintf(a.stdout, "resumed %s of %s (paused by %s since %s: %s); missed slots follow its catchup policy\n",
		which, pos[0], ans.Pause.By, formatTime(ans.Pause.At), ans.Pause.Reason)
	return nil
}

// pauseInStore pauses or resumes on a state nobody serves, audited as the
// API audits it.
func pauseInStore(ctx context.Context, st state.Store, playbook string, trig *triggerFlag, reason string, pause bool) (api.SchedulePauseAnswer, error) {
	index := state.AllTriggers
	if trig.set {
		index = trig.i
	}
	var ans api.SchedulePauseAnswer
	var err error
	action := "schedule.resume"
	if pause {
		action = "schedule.pause"
		ans = api.SchedulePauseAnswer{Status: "paused", Pause: state.SchedulePause{Playbook: playbook, Trigger: index, Reason: reason, By: localName(), At: time.Now().UTC()}}
		err = st.PauseSchedule(ctx, ans.Pause)
	} else {
		var p *state.SchedulePause
		p, err = st.ResumeSchedule(ctx, playbook, index)
		if errors.Is(err, state.ErrNotFound) {
			what := "every trigger"
			if index != state.AllTriggers {
				what = fmt.Sprintf("trigger %d", index)
			}
			err = &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("playbook %s: no pause of %s to resume", playbook, what)}
		}
		if p != nil {
			ans = api.SchedulePauseAnswer{Status: "resumed", Pause: *p}
		}
	}
	result := "ok"
	if err != nil {
		result = string(fault.CodeOf(err))
	}
	detail := map[string]any{"trigger": index}
	if reason != "" {
		detail["reason"] = reason
	}
	rec := state.AuditRecord{Identity: localName(), Action: action, Target: "playbook:" + playbook, Result: result, Source: "local", Detail: detail}
	if aerr := st.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil && err == nil {
		err = fmt.Errorf("%s of %s done, but its audit record was not written: %w", action, playbook, aerr)
	}
	return ans, err
}

func cmdScheduleRun(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "schedule run", usage: "PLAYBOOK [--trigger i] [flags]",
		summary: "Start a run of a playbook's schedule trigger now, with the inputs the trigger sets.",
		details: `The run sees trigger.slot = now (and trigger.via "run now", trigger.by you)
and starts with the inputs the trigger's inputs: give over it, as a slot of
the schedule would; it is recorded as started by you. A pause does not hold
it. --trigger is needed when the playbook has several schedule triggers.
Prints the run's ID; follow it with 'runbook runs logs -f ID'. Audited.`,
	})
	trig := addTriggerFlag(fs, "the schedule trigger at this `index` of the playbook's triggers (default: its only one)")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the PLAYBOOK name")
	if err != nil {
		return err
	}
	b, err := openScheduleAPI(ctx, o, "run")
	if err != nil {
		return err
	}
	var r api.Run
	if err := b.do(ctx, http.MethodPost, playbookPath(pos[0], "run"), api.ScheduleControl{Trigger: trig.ptr()}, &r); err != nil {
		return withHint(err, "runbook schedule status "+pos[0])
	}
	if out.json {
		return writeJSON(a.stdout, r)
	}
	fmt.Fprintf(a.stdout, "run %s started (slot %v); follow it with: runbook runs logs -f %s\n", r.ID, r.Trigger["slot"], r.ID)
	return nil
}

func cmdScheduleBackfill(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "schedule backfill", usage: "PLAYBOOK --from TIME --to TIME [--trigger i] [--dry-run] [--max N] [flags]",
		summary: "Start one run per slot of a schedule between two times, each with its slot as trigger.slot.",
		details: `Lists the cron's own slots from --from to --to (both included; a slot still
to come is left to the scheduler) and starts a run for each that has none,
as the scheduler would have: the slots a pause kept from firing or the
catchup policy dropped. A slot the scheduler fired, or an earlier backfill
started, is not started again, on any replica; a slot the overlap policy
skipped stays skipped. --dry-run lists the slots and what each would do. A
range of more than --max slots is refused before anything starts. Audited.`,
	})
	trig := addTriggerFlag(fs, "the schedule trigger at this `index` of the playbook's triggers (default: its only one)")
	from := fs.String("from", "", "the first `time` of the range, RFC 3339 (2026-11-01T00:00:00Z)")
	to := fs.String("to", "", "the last `time` of the range, RFC 3339")
	dry := fs.Bool("dry-run", false, "list the slots and what each would do; start nothing")
	maxSlots := fs.Int("max", 100, "refuse a range of more than `n` slots")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the PLAYBOOK name")
	if err != nil {
		return err
	}
	for _, f := range []struct{ name, val string }{{"--from", *from}, {"--to", *to}} {
		if _, err := time.Parse(time.RFC3339, f.val); err != nil {
			return usageErrorf(fs.Name(), "%s: want an RFC 3339 time like 2026-11-01T00:00:00Z, got %q", f.name, f.val)
		}
	}
	if *maxSlots < 1 {
		return usageErrorf(fs.Name(), "--max must be at least 1 (got %d)", *maxSlots)
	}
	b, err := openScheduleAPI(ctx, o, "backfill")
	if err != nil {
		return err
	}
	var ans api.BackfillAnswer
	req := api.BackfillRequest{Trigger: trig.ptr(), From: *from, To: *to, DryRun: *dry, Max: *maxSlots}
	if err := b.do(ctx, http.MethodPost, playbookPath(pos[0], "backfill"), req, &ans); err != nil {
		return withHint(err, "runbook schedule backfill "+pos[0]+" --from "+*from+" --to "+*to+" --dry-run")
	}
	if out.json {
		return writeJSON(a.stdout, ans)
	}
	tw := newTable(a.stdout, 2)
	tw.row("SLOT", "OUTCOME", "RUN")
	for _, s := range ans.Slots {
		tw.row(s.Slot, s.Outcome, orDash(s.Run+s.Note))
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if ans.DryRun {
		n := 0
		for _, s := range ans.Slots {
			if s.Outcome == "would start" {
				n++
			}
		}
		fmt.Fprintf(a.stdout, "%d slots, %d would start (dry run: nothing started)\n", len(ans.Slots), n)
		return nil
	}
	fmt.Fprintf(a.stdout, "%d slots, %d runs started\n", len(ans.Slots), ans.Started)
	return nil
}

func cmdScheduleStatus(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "schedule status", usage: "[PLAYBOOK] [flags]",
		summary: "Show the schedules runbook serve fires: pauses, last and next slots, and each recent slot with its run or why it has none.",
	})
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 0, 1, "a PLAYBOOK name")
	if err != nil {
		return err
	}
	b, err := openScheduleAPI(ctx, o, "status")
	if err != nil {
		return err
	}
	var list api.ScheduleList
	if err := b.do(ctx, http.MethodGet, "/api/v1/schedules", nil, &list); err != nil {
		return withHint(err, "")
	}
	shown := list.Schedules[:0]
	for _, sc := range list.Schedules {
		if len(pos) == 0 || sc.Playbook == pos[0] {
			shown = append(shown, sc)
		}
	}
	if out.json {
		list.Schedules = shown
		return writeJSON(a.stdout, list)
	}
	if len(shown) == 0 {
		fmt.Fprintln(a.stdout, "no schedules")
		return nil
	}
	for i, sc := range shown {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		fmt.Fprintf(a.stdout, "%s triggers[%d]: cron %q, catchup %s\n", sc.Playbook, sc.Trigger, sc.Cron, orDash(sc.Catchup))
		if p := sc.Paused; p != nil {
			fmt.Fprintf(a.stdout, "  PAUSED by %s since %s: %s\n", p.By, formatTime(p.At), p.Reason)
		}
		if len(sc.Next) > 0 {
			fmt.Fprintf(a.stdout, "  next %s\n", sc.Next[0])
		}
		tw := newTable(a.stdout, 2)
		for _, sl := range sc.Recent {
			what := sl.Run + " " + string(sl.Status)
			if sl.Run == "" {
				what = sl.Note
			}
			tw.row("  "+sl.Slot, what)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	return nil
}
