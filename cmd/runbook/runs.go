package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"

	"github.com/runbook/runbook/internal/suggest"
)

var runsVerb = &verb{
	name:    "runs",
	summary: "list, inspect, approve, cancel and retry runs",
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

// statusList is --status: comma separated, repeatable.
type statusList []state.RunStatus

func (l *statusList) String() string { return "" }

func (l *statusList) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch st := state.RunStatus(p); st {
		case state.RunPending, state.RunRunning, state.RunWaiting, state.RunSucceeded,
			state.RunFailed, state.RunCancelled, state.RunSkipped:
			*l = append(*l, st)
		default:
			return fmt.Errorf("unknown status %q (pending, running, waiting, succeeded, failed, cancelled, skipped)", p)
		}
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
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	b, err := o.open(ctx)
	if err != nil {
		return err
	}
	var runs []*state.Run
	if b != nil {
		defer b.close()
		runs, err = b.list(ctx, state.RunFilter{Status: status, Playbook: *pbName, Limit: *limit})
		if err != nil {
			return withHint(err, "")
		}
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
		tw.row(r.ID, r.Playbook, string(r.Status), formatTime(startOf(r)), runDuration(r), errText)
	}
	return tw.flush()
}

func startOf(r *state.Run) time.Time {
	if !r.StartedAt.IsZero() {
		return r.StartedAt
	}
	return r.CreatedAt
}

func runDuration(r *state.Run) string {
	switch {
	case r.StartedAt.IsZero():
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

// getRun reads a run, with a clear error when it does not exist.
func getRun(ctx context.Context, store state.Store, id string) (*state.Run, error) {
	r, err := store.GetRun(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, &exitError{code: 1, err: fmt.Errorf("no run %q", id), hint: "runbook runs list"}
	}
	if err != nil {
		return nil, withHint(err, "")
	}
	return r, nil
}

// newRunsOpener adds --state, --secrets and --server to fs and returns
// what opens the runs verb's backend once the flags are parsed.
func newRunsOpener(a *app, fs *flag.FlagSet) *runsOpener {
	o := &runsOpener{a: a, sf: &stateFlags{}, srv: &serverFlags{}}
	o.sf.addState(fs)
	o.sf.addSecrets(fs)
	o.srv.add(fs)
	return o
}

// openForRun opens the backend that must hold runID and returns it with
// the run's whole ID: runID may be a unique prefix of it (resolveRunID).
func (o *runsOpener) openForRun(ctx context.Context, runID string) (runsBackend, string, error) {
	b, err := o.open(ctx)
	if err != nil {
		return nil, "", err
	}
	if b == nil {
		return nil, "", &exitError{code: 1, err: fmt.Errorf("no run %q: the state file does not exist yet", runID), hint: "runbook runs list --state PATH"}
	}
	id, err := resolveRunID(ctx, b, runID)
	if err != nil {
		b.close()
		return nil, "", err
	}
	return b, id, nil
}

func cmdRunsShow(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs show", usage: "RUN_ID [--output json]",
		summary: "Show a run: status, inputs, error, and each step's status, attempts and duration (outputs with --output json).",
	})
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
	doc, err := docOf(ctx, b, id)
	if err != nil {
		return err
	}
	if out.json {
		return writeJSON(a.stdout, doc)
	}
	w := a.stdout
	r := doc.Run
	fmt.Fprintf(w, "run %s\n", r.ID)
	pb := r.Playbook
	if r.File != "" {
		pb += " (" + r.File + ")"
	}
	fmt.Fprintf(w, "  playbook:  %s\n", pb)
	fmt.Fprintf(w, "  status:    %s\n", r.Status)
	if r.ParentID != "" {
		fmt.Fprintf(w, "  parent:    %s (step %s)\n", r.ParentID, r.ParentStep)
	}
	if r.RetryOf != "" {
		fmt.Fprintf(w, "  retries:   %s (from step %s)\n", r.RetryOf, r.RetryFrom)
	}
	fmt.Fprintf(w, "  created:   %s\n", formatTime(r.CreatedAt))
	if !r.StartedAt.IsZero() {
		fmt.Fprintf(w, "  started:   %s\n", formatTime(r.StartedAt))
	}
	if !r.EndedAt.IsZero() {
		fmt.Fprintf(w, "  ended:     %s (%s)\n", formatTime(r.EndedAt), runDuration(r))
	}
	if len(r.Inputs) > 0 {
		fmt.Fprintf(w, "  inputs:   %s\n", formatData(r.Inputs))
	}
	if len(r.Trigger) > 0 {
		fmt.Fprintf(w, "  trigger:  %s\n", formatData(r.Trigger))
	}
	if r.Error != nil {
		fmt.Fprintf(w, "  error:     %s (%s)\n", r.Error.Message, r.Error.Code)
	}
	if len(r.Outputs) > 0 {
		fmt.Fprintf(w, "  outputs:  %s\n", formatData(r.Outputs))
	}
	if len(doc.Steps) == 0 {
		fmt.Fprintln(w, "\nno steps have run")
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w, 2)
	tw.row("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR")
	waiting := false
	for _, s := range doc.Steps {
		dur := "-"
		if !s.StartedAt.IsZero() && !s.EndedAt.IsZero() {
			dur = formatDuration(s.EndedAt.Sub(s.StartedAt))
		} else if !s.StartedAt.IsZero() && !s.Status.Done() {
			dur = formatDuration(time.Since(s.StartedAt)) + "…"
		}
		errText := ""
		if s.Error != nil {
			errText = oneLine(s.Error.Message, 80)
		}
		tw.row(s.ID, string(s.Status), strconv.Itoa(s.Attempts), dur, errText)
		waiting = waiting || s.Status == state.StepWaiting
	}
	if err := tw.flush(); err != nil {
		return err
	}
	// A parked run is waiting; under runbook serve the run stays running
	// while its approval step waits.
	if r.Status == state.RunWaiting || waiting && !r.Status.Done() {
		runID, step := waitingOn(ctx, b, r.ID)
		fmt.Fprintf(w, "\nwaiting for approval of step %s; answer with: runbook runs approve %s %s\n", step, runID, step)
	}
	return nil
}

// docOf reads a run and its steps, without the playbook snapshot and the
// steps' internal checkpoints: the document of runs show --output json.
func docOf(ctx context.Context, b runsBackend, id string) (*runDocument, error) {
	r, err := b.get(ctx, id)
	if err != nil {
		return nil, err
	}
	recs, err := b.steps(ctx, id)
	if err != nil {
		return nil, withHint(err, "")
	}
	cp := *r
	cp.Snapshot = nil
	for _, rec := range recs {
		rec.Checkpoint = nil
	}
	if recs == nil {
		recs = []*state.StepRecord{}
	}
	return &runDocument{Run: &cp, Steps: recs}, nil
}

// waitingOn finds the approval step a run waits on, following
// sub-playbook runs: it returns the run that owns the step.
func waitingOn(ctx context.Context, b runsBackend, runID string) (string, string) {
	for range 16 { // sub-playbooks nest; bound the walk
		recs, err := b.steps(ctx, runID)
		if err != nil {
			return runID, "?"
		}
		var step string
		for _, rec := range recs {
			if rec.Status == state.StepWaiting {
				step = rec.ID
				break
			}
		}
		if step == "" {
			return runID, "?"
		}
		children, err := b.children(ctx, runID)
		next := ""
		if err == nil {
			for _, c := range children {
				if c.ParentStep == step && !c.Status.Done() {
					next = c.ID
					break
				}
			}
		}
		if next == "" {
			return runID, step
		}
		runID = next
	}
	return runID, "?"
}

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
	by := fs.String("by", "", "who answers (default $USER, else the login name); recorded with the answer")
	var fields kvList
	fs.Var(&fields, "field", "response field `key=value` (repeatable)")
	noResume := fs.Bool("no-resume", false, "record the answer without continuing the run (with a server: do not wait for it)")
	out := addOutputFlag(fs, "text")
	quiet := fs.Bool("quiet", false, "no progress: print only the outcome")
	o := newRunsOpener(a, fs)
	var sims simFlags
	sims.add(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 2, 2, "RUN_ID and STEP"); err != nil {
		return err
	}
	runID, step := pos[0], pos[1]
	if *by == "" {
		*by = currentUser()
	}
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
		return a.approveRemote(ctx, api, r, step, answer, verdict, *noResume, out, *quiet)
	}
	store := b.(*storeBackend).store
	src, err := o.secrets()
	if err != nil {
		return err
	}
	root := rootRun(ctx, store, r)
	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	prog := nopProgress{}
	opts := a.engineOptions(store, src)
	opts.Connection = conns.resolve
	var p progress = prog
	if !*noResume {
		p = a.newProgress(out, *quiet, root.ID)
	}
	opts.Observer = p.observe
	eng := engine.New(opts)
	if err := eng.Approve(ctx, runID, step, answer); err != nil {
		p.close()
		return withHint(err, "runbook runs show "+runID)
	}
	if *noResume {
		fmt.Fprintf(a.stdout, "step %s of run %s %s; continue with: runbook run --resume %s\n", step, runID, verdict, root.ID)
		return nil
	}
	if err := eng.ReleaseStaleLocks(ctx); err != nil {
		p.close()
		return withHint(err, "")
	}
	res, err := eng.Resume(ctx, root.ID)
	p.close()
	if res == nil {
		return withHint(err, "runbook run --resume "+root.ID)
	}
	return a.finishRun(ctx, store, res, err, out)
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

// rootRun follows ParentID links to the top-level run: resuming it resumes
// its sub-playbook runs.
func rootRun(ctx context.Context, store state.Store, r *state.Run) *state.Run {
	for range 16 {
		if r.ParentID == "" {
			return r
		}
		p, err := store.GetRun(ctx, r.ParentID)
		if err != nil {
			return r
		}
		r = p
	}
	return r
}

func cmdRunsCancel(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs cancel", usage: "RUN_ID",
		summary: "Cancel an unfinished run (and its sub-playbook runs). It can still be resumed with 'runbook run --resume RUN_ID'.",
	})
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
	if r.Status.Done() {
		return &exitError{code: 1, err: &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s already %s", r.ID, r.Status)}, hint: "runbook runs show " + r.ID}
	}
	if api, ok := b.(*apiBackend); ok {
		if err := api.cancel(ctx, r.ID); err != nil {
			return withHint(err, "runbook runs show "+r.ID)
		}
		// The server stops the run's steps; wait for the run to end so the
		// next command sees it cancelled.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			cur, err := api.get(ctx, r.ID)
			if err != nil {
				return err
			}
			if cur.Status.Done() {
				fmt.Fprintf(a.stdout, "run %s %s\n", r.ID, cur.Status)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		fmt.Fprintf(a.stdout, "run %s is cancelling; runbook runs show %s tells when it ended\n", r.ID, r.ID)
		return nil
	}
	store := b.(*storeBackend).store
	// This process holds the state file, so no other process executes the
	// run: marking it cancelled is all there is to do.
	cancelled, err := cancelRun(ctx, store, r)
	if err != nil {
		return withHint(err, "")
	}
	locks, err := store.Locks(ctx)
	if err == nil {
		for _, l := range locks {
			if cancelled[l.Owner] {
				_ = store.ReleaseLock(ctx, l.Key, l.Owner)
			}
		}
	}
	fmt.Fprintf(a.stdout, "run %s cancelled\n", r.ID)
	return nil
}

// cancelRun marks r and its unfinished sub-playbook runs cancelled and
// returns their IDs.
func cancelRun(ctx context.Context, store state.Store, r *state.Run) (map[string]bool, error) {
	done := map[string]bool{}
	queue := []*state.Run{r}
	user := os.Getenv("USER")
	msg := "run cancelled"
	if user != "" {
		msg += " by " + user
	}
	for len(queue) > 0 && len(done) < 1000 {
		cur := queue[0]
		queue = queue[1:]
		if done[cur.ID] || cur.Status.Done() {
			continue
		}
		now := time.Now()
		cur.Status, cur.EndedAt, cur.Owner = state.RunCancelled, now, ""
		cur.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: msg}
		if err := store.SaveRun(ctx, cur, state.Event{Time: now, Type: "run.cancelled", Message: msg}); err != nil {
			return done, fmt.Errorf("cancel run %s: %w", cur.ID, err)
		}
		done[cur.ID] = true
		children, err := store.ListRuns(ctx, state.RunFilter{ParentID: cur.ID})
		if err != nil {
			return done, err
		}
		sort.Slice(children, func(i, j int) bool { return children[i].ID < children[j].ID })
		queue = append(queue, children...)
	}
	return done, nil
}

func cmdRunsRetry(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs retry", usage: "RUN_ID [--from STEP] [-i SECRET=VALUE ...] [flags]",
		summary: "Run a failed or cancelled run again as a new run, from a step, keeping the outputs of the steps before it.",
		details: `Without --from the retry starts at the first step that did not succeed.
Steps before it that succeeded (and do not need the step retried from) are
reused as they are; the others run again. The new run executes here with
the same progress and exit code as 'runbook run' (0 succeeded, 1 failed
or cancelled, 2 usage); through runbook serve the server executes it and
its progress is shown until it ends or waits for an approval (--detach:
print the new run's ID and return). The state file never keeps a secret
input: give the run's secret inputs again with -i (other inputs are kept).`,
	})
	from := fs.String("from", "", "retry from this `step` (default: the first step that did not succeed)")
	var secretInputs kvList
	fs.Var(&secretInputs, "i", "a secret input `name=value` of the run, given again (repeatable)")
	detach := fs.Bool("detach", false, "through runbook serve: print the new run's ID without following it")
	out := addOutputFlag(fs, "text")
	quiet := fs.Bool("quiet", false, "no progress: print only the outcome")
	o := newRunsOpener(a, fs)
	var sims simFlags
	sims.add(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, 1, "the RUN_ID (runbook runs list --status failed shows them)"); err != nil {
		return err
	}
	runID := pos[0]
	given, err := readInputs("", &secretInputs)
	if err != nil {
		return err
	}
	b, runID, err := o.openForRun(ctx, runID)
	if err != nil {
		return err
	}
	defer b.close()
	if api, ok := b.(*apiBackend); ok {
		r, err := api.retry(ctx, runID, *from, given)
		if err != nil {
			return withHint(err, "runbook runs show "+runID)
		}
		if *detach {
			if out.json {
				return writeJSON(a.stdout, map[string]string{"id": r.ID, "retry_of": r.RetryOf, "retry_from": r.RetryFrom})
			}
			fmt.Fprintf(a.stdout, "run %s retries run %s from step %s; follow it with: runbook runs logs -f %s\n", r.ID, runID, r.RetryFrom, r.ID)
			return nil
		}
		p := a.newProgress(out, *quiet, r.ID)
		err = a.watchRemote(ctx, api, []string{r.ID}, []uint64{0}, p)
		p.close()
		if err != nil {
			return err
		}
		return a.finishRemote(ctx, api, r.ID, out)
	}
	if *detach {
		return usageErrorf("runs retry", "--detach needs runbook serve: without a server the retry runs in this process")
	}
	store := b.(*storeBackend).store
	src, err := o.secrets()
	if err != nil {
		return err
	}
	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	prog := a.newProgress(out, *quiet, "")
	opts := a.engineOptions(store, src)
	opts.Connection = conns.resolve
	opts.Observer = prog.observe
	eng := engine.New(opts)
	if err := eng.ReleaseStaleLocks(ctx); err != nil {
		prog.close()
		return withHint(err, "")
	}
	if len(given) > 0 { // refused before a new run is created
		old, err := store.GetRun(ctx, runID)
		if err == nil {
			var pb *playbook.Playbook
			if pb, err = playbook.Parse(old.File, old.Snapshot, playbook.LoadOptions{}); err == nil {
				_, err = engine.WithSecretInputs(pb, old, given)
			}
		}
		if err != nil {
			prog.close()
			return withHint(err, "runbook runs show "+runID)
		}
	}
	r, pb, err := eng.Retry(ctx, runID, *from)
	if err != nil {
		prog.close()
		return withHint(err, "runbook runs show "+runID)
	}
	inputs, err := engine.WithSecretInputs(pb, r, given)
	if err != nil {
		prog.close()
		return withHint(err, "runbook runs show "+runID)
	}
	res, err := eng.ExecuteInputs(ctx, pb, r, inputs)
	prog.close()
	if res == nil {
		return withHint(err, "runbook run --resume "+r.ID)
	}
	return a.finishRun(ctx, store, res, err, out)
}
