package core_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

type lineSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *lineSink) Line(stream, text string) {
	s.mu.Lock()
	s.lines = append(s.lines, stream+": "+text)
	s.mu.Unlock()
}

func TestShellPrintsItsLinesAndKeepsAMebibyteInItsOutputs(t *testing.T) {
	d, ok := steps.Lookup("shell")
	require.True(t, ok)
	run := func(with map[string]any) (*lineSink, steps.Outputs) {
		t.Helper()
		c := stepstest.NewCall(t, d, with)
		sink := &lineSink{}
		c.Output = sink
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		return sink, out
	}

	t.Run("each line goes to the step's output, a last one without newline too", func(t *testing.T) {
		sink, out := run(map[string]any{"command": "echo one; echo two >&2; printf three"})
		assert.ElementsMatch(t, []string{"stdout: one", "stderr: two", "stdout: three"}, sink.lines)
		assert.Equal(t, "one\nthree", out["stdout"])
	})
	t.Run("stdout beyond a mebibyte is cut in the outputs, every line still printed", func(t *testing.T) {
		sink, out := run(map[string]any{"command": "yes 0123456789abcde | head -c 3000005", "max_output_bytes": 4 << 20})
		assert.Equal(t, 1<<20-1, len(out["stdout"].(string)), "the first mebibyte, its last newline removed")
		assert.Equal(t, true, out["truncated"])
		assert.Equal(t, 3000000/16+1, len(sink.lines))
		assert.Equal(t, "stdout: 0123456789abcde", sink.lines[0])
		assert.Equal(t, "stdout: 01234", sink.lines[len(sink.lines)-1], "the last partial line")
	})
	t.Run("the default limit reads as before", func(t *testing.T) {
		_, out := run(map[string]any{"command": "yes | head -c 1048576"})
		assert.Equal(t, false, out["truncated"])
		assert.Equal(t, 1<<20-1, len(out["stdout"].(string)), "a trailing newline removed")
	})
}
