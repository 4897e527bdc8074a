package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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
