package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

func (h *harness) output(runID string, f state.OutputFilter) []state.OutputLine {
	h.t.Helper()
	lines, err := h.store.Output(context.Background(), runID, f)
	require.NoError(h.t, err)
	return lines
}

func outputTexts(lines []state.OutputLine) []string {
	out := []string{}
	for _, l := range lines {
		out = append(out, l.Stream+": "+l.Text)
	}
	return out
}

func TestShellOutputIsStoredLineByLineOutsideTheRecord(t *testing.T) {
	var mu sync.Mutex
	var observed []state.OutputLine
	h := newHarness(t, func(o *engine.Options) {
		o.Observer.Output = func(_ string, lines []state.OutputLine) {
			mu.Lock()
			observed = append(observed, lines...)
			mu.Unlock()
		}
	})
	r, err := h.run(`
version: 1
name: out
steps:
  - id: build
    uses: shell
    with: {command: "echo one; echo two >&2; printf 'three\r\nno newline'"}
  - id: each
    for_each: [a, b]
    uses: shell
    with: {command: "echo item ${{ item }}"}
`, nil)
	require.NoError(t, err)

	lines := h.output(r.ID, state.OutputFilter{Step: "build"})
	// stdout and stderr are separate pipes: their relative order is not
	// fixed, each one's is.
	texts := outputTexts(lines)
	assert.ElementsMatch(t, []string{"stdout: one", "stderr: two", "stdout: three", "stdout: no newline"}, texts)
	var stdout []string
	for _, l := range lines {
		if l.Stream == state.StreamStdout {
			stdout = append(stdout, l.Text)
		}
		assert.Equal(t, 1, l.Attempt)
		assert.Equal(t, "build", l.Step)
		assert.NotZero(t, l.Seq)
	}
	assert.Equal(t, []string{"one", "three", "no newline"}, stdout)
	assert.ElementsMatch(t, []string{"stdout: item a", "stdout: item b"}, outputTexts(h.output(r.ID, state.OutputFilter{Step: "each"})))
	assert.Equal(t, []string{"stdout: item b"}, outputTexts(h.output(r.ID, state.OutputFilter{Step: "each[1]"})))

	mu.Lock()
	assert.Len(t, observed, 6, "the observer sees every line once")
	mu.Unlock()
	// The step's outputs are as before.
	assert.Equal(t, "one\nthree\r\nno newline", h.steps(r.ID)["build"].Outputs["stdout"])
}

func TestSecretsPrintedByAStepAreMaskedInTheStoredOutput(t *testing.T) {
	var mu sync.Mutex
	var observed []string
	h := newHarness(t, func(o *engine.Options) {
		o.Observer.Output = func(_ string, lines []state.OutputLine) {
			mu.Lock()
			for _, l := range lines {
				observed = append(observed, l.Text)
			}
			mu.Unlock()
		}
	})
	r, err := h.run(`
version: 1
name: leak
steps:
  - id: leak
    uses: shell
    with:
      command: 'echo "token=$T"; echo "$T" >&2'
      env: {T: "${{ secrets.TOKEN }}"}
`, nil)
	require.NoError(t, err)
	lines := h.output(r.ID, state.OutputFilter{})
	assert.ElementsMatch(t, []string{"stdout: token=***", "stderr: ***"}, outputTexts(lines))
	mu.Lock()
	assert.ElementsMatch(t, []string{"token=***", "***"}, observed)
	mu.Unlock()
	raw, err := os.ReadFile(filepath.Join(h.dir, "state.db"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "s3cr3t-t0ken-value")
}

func TestStepOutputIsCappedWithANote(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Limits.MaxStepOutput = 1000 })
	r, err := h.run(`
version: 1
name: chatty
steps:
  - id: chatty
    uses: shell
    with: {command: "seq 1 1000"}
`, nil)
	require.NoError(t, err)
	lines := h.output(r.ID, state.OutputFilter{Step: "chatty"})
	require.NotEmpty(t, lines)
	kept := 0
	for _, l := range lines[:len(lines)-1] {
		kept += len(l.Text) + 1
		assert.Equal(t, state.StreamStdout, l.Stream)
	}
	assert.LessOrEqual(t, kept, 1000)
	assert.Greater(t, kept, 900)
	last := lines[len(lines)-1]
	assert.Equal(t, state.StreamNote, last.Stream)
	// seq 1 1000 prints 3893 bytes.
	assert.Contains(t, last.Text, "output truncated: "+itoa(3893-kept)+" more bytes")
	assert.Equal(t, "1", lines[0].Text)
	assert.True(t, strings.HasPrefix(last.Text, "… "))
}

// printedWrites is a store that counts AppendOutput calls and notes, for
// each step write carrying output (StepRecord.Printed), the record's
// status and the lines' texts.
type printedWrites struct {
	state.Store
	mu      sync.Mutex
	appends int
	printed []string // "step status: text"
}

func (p *printedWrites) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	p.mu.Lock()
	p.appends++
	p.mu.Unlock()
	return p.Store.AppendOutput(ctx, runID, lines)
}

func (p *printedWrites) note(recs []*state.StepRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rec := range recs {
		for _, l := range rec.Printed {
			p.printed = append(p.printed, rec.ID+" "+string(rec.Status)+": "+l.Text)
		}
	}
}

func (p *printedWrites) SaveSteps(ctx context.Context, recs []*state.StepRecord, evs ...state.Event) error {
	p.note(recs)
	return p.Store.SaveSteps(ctx, recs, evs...)
}

func (p *printedWrites) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	p.note(recs)
	return p.Store.SaveRunSteps(ctx, r, recs, evs...)
}

// printedHarness is a harness whose store is a printedWrites, with the
// options opts also sets.
func printedHarness(t *testing.T, opts ...func(*engine.Options)) (*harness, *printedWrites) {
	var p *printedWrites
	h := newHarness(t, append(opts, func(o *engine.Options) {
		p = &printedWrites{Store: o.Store}
		o.Store = p
	})...)
	return h, p
}

// An attempt's last lines are written by the write of the step's end, in
// its transaction, not by a commit of their own before it: a step that
// prints a line and the next step's start cost one commit, as they do
// when it prints nothing. (Lines that wait for the end longer than
// Limits.OutputFlushEvery are written before it, by design: a minute
// here, so that a slow machine's slow `echo` does not count.)
func TestAnAttemptsLastLinesAreWrittenWithItsEnd(t *testing.T) {
	h, p := printedHarness(t, func(o *engine.Options) { o.Limits.OutputFlushEvery = time.Minute })
	r, err := h.run(`
version: 1
name: printed
steps:
  - {id: one, uses: shell, with: {command: "echo one"}}
  - {id: two, uses: shell, with: {command: "echo two"}}
  - id: each
    for_each: [a, b]
    max_parallel: 2
    uses: shell
    with: {command: "echo ${{ item }}"}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 0, p.appends, "no line was written on its own")
	assert.ElementsMatch(t, []string{"one succeeded: one", "two succeeded: two", "each[0] succeeded: a", "each[1] succeeded: b"}, p.printed)
	lines := h.output(r.ID, state.OutputFilter{})
	require.Len(t, lines, 4)
	assert.Equal(t, []string{"stdout: one", "stdout: two"}, outputTexts(lines[:2]))
	for i, l := range lines {
		assert.Equal(t, uint64(i+1), l.Seq)
	}
}

// A step printing more than a batch has its full batches written while it
// runs and the rest with its end, all in the order printed.
func TestAChattyStepsBatchesComeBeforeItsLastLines(t *testing.T) {
	h, p := printedHarness(t)
	r, err := h.run(`
version: 1
name: chatty
steps:
  - {id: many, uses: shell, with: {command: "seq 1 30000"}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.NotZero(t, p.appends, "no batch was written while the step ran")
	assert.NotEmpty(t, p.printed, "the last lines were not written with the step's end")
	lines, err := h.store.Output(context.Background(), r.ID, state.OutputFilter{Limit: 40000})
	require.NoError(t, err)
	require.Len(t, lines, 30000)
	for i, l := range lines {
		if l.Seq != uint64(i+1) || l.Text != strconv.Itoa(i+1) {
			t.Fatalf("line %d: seq %d, %q", i+1, l.Seq, l.Text)
		}
	}
}
