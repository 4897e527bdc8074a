package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

func cmdRunsShow(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs show", usage: "RUN_ID [--output json]",
		summary: "Show a run: status, inputs, error, and each step's status, attempts and duration (outputs with --output json).",
	})
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 1, "the RUN_ID (runbook runs list shows them)")
	if err != nil {
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
	printStatusHint(w, r)
	if r.ParentID != "" {
		fmt.Fprintf(w, "  parent:    %s (step %s)\n", r.ParentID, r.ParentStep)
	}
	if r.RetryOf != "" {
		fmt.Fprintf(w, "  retries:   %s (from step %s)\n", r.RetryOf, r.RetryFrom)
	}
	if id := r.RerunOf(); id != "" {
		fmt.Fprintf(w, "  rerun of:  %s\n", id)
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
	waiting, err := printSteps(ctx, w, b, r, doc.Steps)
	if err != nil {
		return err
	}
	// A run that only waits for approvals is waiting (parked, or waiting
	// inside runbook serve); one whose other steps go on while an approval
	// step waits is still running.
	if r.Status == state.RunWaiting || waiting && !r.Status.Done() {
		printWaitingOn(ctx, w, b, r)
	}
	return nil
}

// printSteps prints the table of a run's steps, then what each step
// recorded running is doing; waiting reports whether a step waits.
func printSteps(ctx context.Context, w io.Writer, b runsBackend, r *state.Run, steps []*state.StepRecord) (waiting bool, err error) {
	fmt.Fprintln(w)
	tw := newTable(w, 2)
	tw.row("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR")
	var running []*state.StepRecord
	for _, s := range steps {
		status, dur := string(s.Status), "-"
		switch {
		case s.Status == state.StepRunning && r.Status == state.RunInterrupted:
			status = stepInterrupted // no process runs it: no time goes by
		case !s.StartedAt.IsZero() && !s.EndedAt.IsZero():
			dur = formatDuration(s.EndedAt.Sub(s.StartedAt))
		case !s.StartedAt.IsZero() && !s.Status.Done():
			dur = formatDuration(time.Since(s.StartedAt)) + "…"
		}
		errText := ""
		if s.Error != nil {
			errText = oneLine(s.Error.Message, 80)
		}
		tw.row(s.ID, status, strconv.Itoa(s.Attempts), dur, errText)
		waiting = waiting || s.Status == state.StepWaiting
		if s.Status == state.StepRunning {
			running = append(running, s)
		}
	}
	if err := tw.flush(); err != nil {
		return false, err
	}
	for _, s := range running {
		if err := printRunning(ctx, w, b, r, s); err != nil {
			return false, err
		}
	}
	return waiting, nil
}

// stepInterrupted is how runs show names a step recorded running in a
// run whose process is gone (state.RunInterrupted): nothing runs it.
const stepInterrupted = "interrupted"

// shownLines is how many of a running step's last lines runs show prints.
const shownLines = 20

// printRunning says what a step recorded running is doing: its attempt,
// how long it has run, and the last lines its attempt printed so far
// (all of them with runs logs). In an interrupted run it says that the
// step was running when the process stopped, and what it printed then.
func printRunning(ctx context.Context, w io.Writer, b runsBackend, r *state.Run, s *state.StepRecord) error {
	lines, total, err := lastLines(ctx, b, r.ID, s)
	if err != nil {
		return withHint(err, "")
	}
	if r.Status == state.RunInterrupted {
		fmt.Fprintf(w, "\nstep %s was running (attempt %d) when the process that ran it stopped; it runs again when the run resumes", s.ID, s.Attempts)
	} else {
		fmt.Fprintf(w, "\nstep %s is running: attempt %d, for %s", s.ID, s.Attempts, formatDuration(time.Since(s.StartedAt)))
	}
	switch {
	case total == 0:
		fmt.Fprintln(w, "; it has printed nothing")
		return nil
	case total > len(lines):
		fmt.Fprintf(w, "; its last %d of %d lines (all: runbook runs logs %s %s):\n", len(lines), total, r.ID, s.ID)
	default:
		fmt.Fprintln(w, "; it printed:")
	}
	for _, l := range lines {
		mark := "|"
		if l.Stream == state.StreamStderr {
			mark = "!"
		}
		fmt.Fprintf(w, "  %s %s\n", mark, l.Text)
	}
	return nil
}

// lastLines reads what the step's current attempt printed: its last
// shownLines lines, and how many it printed.
func lastLines(ctx context.Context, b runsBackend, runID string, s *state.StepRecord) ([]state.OutputLine, int, error) {
	lr, ok := b.(logReader)
	if !ok {
		return nil, 0, nil
	}
	var last []state.OutputLine
	total := 0
	err := lr.readLog(ctx, runID, logQuery{output: true, step: s.ID}, func(it logItem) bool {
		if l := it.line; l != nil && l.Step == s.ID && l.Attempt == s.Attempts {
			total++
			if len(last) == shownLines {
				last = append(last[:0], last[1:]...)
			}
			last = append(last, *l)
		}
		return true
	})
	return last, total, err
}

// printStatusHint says, under a run's status, what it means for the
// user: how to continue an interrupted or suspended run, or what a run
// queued on a concurrency key waits for.
func printStatusHint(w io.Writer, r *state.Run) {
	switch r.Status {
	case state.RunInterrupted:
		fmt.Fprintf(w, "             the process that ran it (%s) is gone; continue it with: %s\n", ownerName(r.Owner), engine.ResumeHint(r.ID))
	case state.RunSuspended:
		fmt.Fprintf(w, "             stopped with the server; it resumes at its next start (or: %s)\n", engine.ResumeHint(r.ID))
	case state.RunWaiting:
		if r.QueuedOnKey != "" {
			fmt.Fprintf(w, "             queued on concurrency key %q, held by another run; it goes on by itself when the key is released\n", r.QueuedOnKey)
		}
		if r.Paused != "" {
			fmt.Fprintf(w, "             %s; no step starts until the pause is lifted (runbook pause list, runbook resume)\n", r.Paused)
		}
	}
}

// printWaitingOn says what a waiting run waits on: the approval to answer,
// or, parked until a moment (a sleep, a task's next poll), when it goes
// on by itself. A run queued on a concurrency key is said so under its
// status.
func printWaitingOn(ctx context.Context, w io.Writer, b runsBackend, r *state.Run) {
	if r.QueuedOnKey != "" {
		return // said under its status
	}
	runID, step := waitingOn(ctx, b, r.ID)
	if step == "?" && r.Paused != "" {
		return // said under its status
	}
	if step == "?" && !r.WakeAt.IsZero() {
		fmt.Fprintf(w, "\nwaiting until %s (a sleep, or a task's next poll); it goes on by itself\n", r.WakeAt.Local().Format("2006-01-02 15:04:05"))
		return
	}
	fmt.Fprintf(w, "\nwaiting for approval of step %s; answer with: %s\n", step, approveCommand(ctx, b, runID, step))
}

// approveCommand is the command line that answers step of run runID,
// with a --field NAME=TYPE for each field its approval requires, in the
// order of their names.
func approveCommand(ctx context.Context, b runsBackend, runID, step string) string {
	cmd := "runbook runs approve " + runID + " " + step
	recs, _ := b.steps(ctx, runID)
	for _, rec := range recs {
		if rec.ID == step {
			cmd += rec.Approval.FieldArgs()
		}
	}
	return cmd
}

func ownerName(owner string) string {
	if owner == "" {
		return "unknown"
	}
	return owner
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
	if sb, ok := b.(*storeBackend); ok && r.Delivery != nil {
		// The server resolves it for an API backend.
		if cp.Trigger, err = state.ResolveTrigger(ctx, sb.store, r); err != nil {
			return nil, withHint(err, "")
		}
	}
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
			if rec.Status == state.StepWaiting && rec.WakeAt.IsZero() { // not parked until a moment
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
