package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

func TestLiveProgressShowsTheLastLinesOfARunningStep(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	t.Setenv("NO_COLOR", "1")
	p := newLiveProgress(w, nopRedactor{}, "")
	now := time.Now()
	p.observe("R", state.Event{Time: now, Type: "step.started", Step: "build", Attempt: 1})
	var lines []state.OutputLine
	for _, s := range []string{"one", "two", "three", "four\x1b[31m red\r"} {
		lines = append(lines, state.OutputLine{Time: now, Step: "build", Stream: state.StreamStdout, Text: s})
	}
	p.output("R", lines)
	time.Sleep(3 * frameInterval)
	p.observe("R", state.Event{Time: now, Type: "step.succeeded", Step: "build", Attempt: 1, Data: map[string]any{"duration_ms": int64(10)}})
	p.close()
	w.Close()
	out := <-got

	frames := strings.Split(out, "\x1b[J")
	var running string
	for _, f := range frames {
		if strings.Contains(f, "● build") {
			running = f
		}
	}
	require.NotEmpty(t, running, out)
	assert.NotContains(t, running, "│ one", "only the last three lines")
	assert.Contains(t, running, "      │ two\n      │ three\n      │ four·[31m red·\n", "the last lines, escapes made harmless")
	final := frames[len(frames)-1]
	assert.Equal(t, "  ✓ build   0.01s\n", final, "a finished step drops its lines")
}

func TestPlainProgressPrintsEveryLineUnderItsStep(t *testing.T) {
	var b bytes.Buffer
	p := newPlainProgress(&b, nopRedactor{}, "R")
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)
	p.output("R", []state.OutputLine{
		{Time: at, Step: "build", Stream: state.StreamStdout, Text: "compiling"},
		{Time: at, Step: "build", Stream: state.StreamStderr, Text: "warning"},
	})
	p.output("R.sub", []state.OutputLine{{Time: at, Step: "inner", Stream: state.StreamCall, Text: "GET /v1/x 200 3ms"}})
	p.close()
	assert.Equal(t, "10:00:00   build | compiling\n10:00:00   build ! warning\n10:00:00   sub/inner | GET /v1/x 200 3ms\n", b.String())
}
