package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

func TestFormatEventWritesOnePlainLine(t *testing.T) {
	at := time.Date(2026, 11, 22, 15, 4, 5, 0, time.Local)
	tests := []struct {
		name string
		ev   state.Event
		want string
	}{
		{"a step start names its attempt", state.Event{Type: "step.started", Step: "build", Attempt: 2}, "step build started (attempt 2)"},
		{"a success gives the duration", state.Event{Type: "step.succeeded", Step: "build", Data: map[string]any{"duration_ms": int64(310)}}, "step build succeeded in 0.31s"},
		{"a JSON duration works too", state.Event{Type: "step.succeeded", Step: "build", Data: map[string]any{"duration_ms": float64(12500)}}, "step build succeeded in 12.5s"},
		{"a failure gives the error and its code", state.Event{Type: "step.failed", Step: "b", Message: "exit status 1", Data: map[string]any{"duration_ms": int64(0), "code": "failed"}}, "step b failed after 0.00s: exit status 1 (failed)"},
		{"a log line has its attributes sorted", state.Event{Type: "log", Step: "build", Level: "INFO", Message: "done", Data: map[string]any{"z": 1, "a": "two words"}}, `build: done a="two words" z=1`},
		{"a warning says its level", state.Event{Type: "log", Step: "build", Level: "WARN", Message: "hm"}, "build: WARN hm"},
		{"run events print their message", state.Event{Type: "run.started", Message: "run started"}, "run started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.ev.Time = at
			assert.Equal(t, "15:04:05 "+tt.want, formatEvent(tt.ev, "", "R"))
		})
	}
	t.Run("sub-playbook steps are prefixed by the calling step", func(t *testing.T) {
		ev := state.Event{Time: at, Type: "step.started", Step: "inner", Attempt: 1}
		s := &runScope{root: "R"}
		assert.Equal(t, "15:04:05 step deploy/inner started (attempt 1)", formatEvent(ev, s.prefix("R.deploy"), "R.deploy"))
	})
}

func TestLiveProgressRedrawsInPlaceAndEndsWithEveryStep(t *testing.T) {
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
	ev := func(typ, step string, data map[string]any) state.Event {
		return state.Event{Time: now, Type: typ, Step: step, Attempt: 1, Message: "m", Data: data}
	}
	p.observe("R", state.Event{Time: now, Type: "run.created", Message: "run created for playbook demo"})
	p.observe("R", ev("step.started", "build", nil))
	time.Sleep(3 * frameInterval)
	p.observe("R", state.Event{Time: now, Type: "log", Step: "build", Level: "INFO", Message: "compiling"})
	p.observe("R", ev("step.succeeded", "build", map[string]any{"duration_ms": int64(1200)}))
	for i := range 500 { // a burst of events must not cause a burst of frames
		id := "loop[" + string(rune('0'+i%10)) + "]"
		p.observe("R", ev("step.started", id, nil))
		p.observe("R", ev("step.succeeded", id, nil))
	}
	p.observe("R", ev("step.succeeded", "loop", map[string]any{"duration_ms": int64(40)}))
	p.observe("R", state.Event{Time: now, Type: "step.skipped", Step: "later", Message: "condition is false"})
	p.observe("R", state.Event{Time: now, Type: "step.failed", Step: "bad", Message: "exit status 3", Data: map[string]any{"duration_ms": int64(5)}})
	p.close()
	w.Close()
	out := <-got

	assert.True(t, strings.HasPrefix(out, "\r\x1b[J"), "a frame starts by clearing the old one")
	assert.Contains(t, out, "run R  demo\n")
	assert.Contains(t, out, "  build: compiling\n")
	assert.Contains(t, out, "\x1b[1A", "later frames move up over the previous one")
	frames := strings.Count(out, "\x1b[J")
	assert.LessOrEqual(t, frames, 8, "frames are rate limited")
	assert.Less(t, strings.Index(out, "build: compiling"), strings.LastIndex(out, "✓ build"), "logs print above the list")
	final := out[strings.LastIndex(out, "\x1b[J")+len("\x1b[J"):]
	assert.True(t, strings.HasSuffix(final, "  ✓ build   1.20s\n  ✓ loop   500 items  0.04s\n  – later   condition is false\n  ✗ bad   0.01s  exit status 3\n"), "the last frame lists every step:\n%s", final)
}
