package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/suggest"
)

func cmdRunsLogs(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs logs", usage: "RUN_ID [STEP] [-f] [--output json]",
		summary: "Print a run's log: step transitions, retries, approvals, the steps' log lines and what they printed.",
		details: `Without STEP, the run's events with the steps' output interleaved by
time ("  build | line"; stderr lines "  build ! line"). With STEP, only
what that step (and its for_each items, STEP[0], ...) printed: a shell
step's stdout and stderr lines as printed, the API calls of http.request
and the cloud steps, and a note where output beyond the 8 MiB kept per
step attempt was dropped.

With -f, new events and lines print as they happen until the run ends,
through the runbook serve (or the running runbook run) that holds the
state file. Without one nothing executes the run, so -f prints the log and
returns. With --output json: without STEP the events as an array (as
before), with STEP the lines ({seq, time, step, attempt, stream, text});
-f prints one object per line instead of an array.`,
	})
	follow := fs.Bool("f", false, "follow: print new events and lines until the run ends")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	pos, err := parsePositional(fs, args, 1, 2, "the RUN_ID (runbook runs list shows them)")
	if err != nil {
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
	q := logQuery{events: true, output: true, follow: *follow}
	if len(pos) == 2 {
		q.events, q.step = false, pos[1]
		if err := knownStep(ctx, b, r, q.step); err != nil {
			return err
		}
	}
	lr, ok := b.(logReader)
	if !ok {
		// A backend that cannot read output: the events alone.
		return a.printEvents(ctx, b, r, out)
	}
	if out.json && !*follow && q.step == "" {
		return a.printEvents(ctx, b, r, out)
	}
	return a.printLog(ctx, lr, r, q, out)
}

// printEvents prints a run's events: as an array with --output json.
func (a *app) printEvents(ctx context.Context, b runsBackend, r *state.Run, out *outputFlag) error {
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
	w := bufio.NewWriter(a.stdout)
	for _, ev := range evs {
		w.WriteString(formatEvent(ev, "", r.ID))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// printLog prints what q selects: as text lines, as one JSON array of
// lines (a step's output, not followed), or one JSON object per line.
func (a *app) printLog(ctx context.Context, lr logReader, r *state.Run, q logQuery, out *outputFlag) error {
	w := bufio.NewWriter(a.stdout)
	var werr error
	array := out.json && !q.follow
	n := 0
	var buf bytes.Buffer
	elem := json.NewEncoder(&buf)
	elem.SetIndent("  ", "  ")
	elem.SetEscapeHTML(false)
	each := func(it logItem) bool {
		switch {
		case array:
			// One array, written as it is read, as writeJSON would.
			sep := ",\n  "
			if n == 0 {
				sep = "[\n  "
			}
			n++
			w.WriteString(sep)
			werr = elem.Encode(it.line)
			b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			w.Write(b)
			buf.Reset()
		case out.json && it.ev != nil:
			werr = json.NewEncoder(w).Encode(it.ev)
		case out.json:
			werr = json.NewEncoder(w).Encode(it.line)
		case it.ev != nil:
			_, werr = io.WriteString(w, formatEvent(*it.ev, "", r.ID)+"\n")
		case q.step != "":
			_, werr = io.WriteString(w, it.line.Text+"\n")
		default:
			_, werr = io.WriteString(w, formatOutputLine(*it.line, "")+"\n")
		}
		if q.follow && werr == nil {
			werr = w.Flush()
		}
		return werr == nil
	}
	err := lr.readLog(ctx, r.ID, q, each)
	if err != nil && ctx.Err() == nil {
		return withHint(err, "runbook runs logs "+r.ID)
	}
	if werr != nil {
		return werr
	}
	if array {
		if n == 0 {
			w.WriteString("[]\n")
		} else {
			w.WriteString("\n]\n")
		}
	}
	return w.Flush()
}

// formatOutputLine renders one output line for the log, with a local time
// stamp, under its step: "15:04:05   build | text"; "!" marks stderr.
func formatOutputLine(l state.OutputLine, prefix string) string {
	mark := " | "
	if l.Stream == state.StreamStderr {
		mark = " ! "
	}
	return l.Time.Local().Format("15:04:05") + "   " + prefix + l.Step + mark + l.Text
}

// knownStep refuses a step a finished run does not have (a step of an
// unfinished run may not have started yet), with "did you mean".
func knownStep(ctx context.Context, b runsBackend, r *state.Run, step string) error {
	if !r.Status.Done() {
		return nil
	}
	recs, err := b.steps(ctx, r.ID)
	if err != nil {
		return withHint(err, "")
	}
	var ids []string
	for _, rec := range recs {
		if rec.ID == step || (strings.HasPrefix(rec.ID, step) && strings.HasPrefix(rec.ID[len(step):], "[")) {
			return nil
		}
		ids = append(ids, rec.ID)
	}
	return &exitError{code: 1, err: fmt.Errorf("run %s has no step %q%s", r.ID, step, suggest.Hint(step, ids)), hint: "runbook runs show " + r.ID}
}
