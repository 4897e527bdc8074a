package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// A file.line step (idempotent: running it again changes nothing) costs
// its run no write of its own: with the run's deferred start, the run's
// one write holds the start, the line's step and the log's, and the end.
// Before, the line's start was written first, alone.
func TestAnIdempotentStepIsOnRecordWithTheRunsNextWrite(t *testing.T) {
	h, w := countedHarness(t, true)
	r, err := h.run(`
version: 1
name: suppress
steps:
  - {id: file, uses: file.line, with: {path: numbers.txt, line: "+821012345678"}}
  - {id: done, uses: log, with: {message: "added ${{ steps.file.outputs.added }}"}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 1, w.writes, "writes after the run's creation")
	var types []string
	for _, ev := range h.stored(r.ID, "") {
		types = append(types, ev.Type)
	}
	assert.Equal(t, []string{"run.created", "run.started", "step.started", "step.succeeded", "step.started", "log", "step.succeeded", "run.succeeded"}, types)
	file := h.steps(r.ID)["file"]
	assert.Equal(t, state.StepSucceeded, file.Status)
	assert.Equal(t, true, file.Outputs["added"])
	data, err := os.ReadFile(filepath.Join(h.dir, "numbers.txt"))
	require.NoError(t, err)
	assert.Equal(t, "+821012345678\n", string(data))
}

// slowLine is the gate of test.slowline (helpers_test.go), an idempotent
// step: an attempt fails while fails is above zero, else waits for
// release.
var slowLine struct {
	sync.Mutex
	release chan struct{}
	fails   int // attempts left to fail
}

// An idempotent step's attempt that runs for engine.ShownAfter is put on
// record while it runs, as any step's: the API, runs show and the UI show
// a step that takes long. Its end is then written after its start.
func TestAnIdempotentStepThatRunsLongIsOnRecordWhileItRuns(t *testing.T) {
	slowLine.Lock()
	slowLine.release, slowLine.fails = make(chan struct{}), 0
	slowLine.Unlock()
	h := newHarness(t)
	began := time.Now()
	run, done := h.startSlow(t)
	until(t, "the running step in the store", func() bool {
		rec := h.steps(run.ID)["slow"]
		return rec != nil && rec.Status == state.StepRunning && rec.Attempts == 1
	})
	assert.GreaterOrEqual(t, time.Since(began), engine.ShownAfter, "not on record before it has run that long")
	h.finishSlow(t, run, done)
}

// gateClock is a fakeClock whose Sleep waits until gate is closed.
type gateClock struct {
	*fakeClock
	gate chan struct{}
}

func (c gateClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-c.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.fakeClock.Sleep(ctx, d)
}

// An idempotent step whose attempt failed is on record while it waits for
// its next attempt (its step.retry event and its error), as any step is.
func TestAnIdempotentStepWaitingToBeTriedAgainIsOnRecord(t *testing.T) {
	slowLine.Lock()
	slowLine.release, slowLine.fails = make(chan struct{}), 1
	slowLine.Unlock()
	gate := make(chan struct{})
	h := newHarness(t, func(o *engine.Options) { o.Clock = gateClock{newFakeClock(), gate} })
	run, done := h.startSlow(t)
	until(t, "the failed attempt in the store", func() bool {
		rec := h.steps(run.ID)["slow"]
		return rec != nil && rec.Attempts == 1 && rec.Error != nil && len(h.stored(run.ID, "step.retry")) == 1
	})
	close(gate)
	until(t, "the next attempt in the store", func() bool {
		rec := h.steps(run.ID)["slow"]
		return rec.Status == state.StepRunning && rec.Attempts == 2
	})
	h.finishSlow(t, run, done)
}

// startSlow starts a run whose first step is slow (test.slowline); the
// run's start is on record before it (the harness does not defer it), so
// nothing else waits for the run's next write.
func (h *harness) startSlow(t *testing.T) (*state.Run, chan *state.Run) {
	pb := h.load(`
version: 1
name: slow
steps:
  - {id: slow, uses: test.slowline, retry: {attempts: 2, delay: 1s}}
  - {id: done, uses: log, with: {message: done}}
`)
	ctx := context.Background()
	run, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	done := make(chan *state.Run, 1)
	go func() {
		r, err := h.engine.Execute(ctx, pb, run)
		assert.NoError(t, err)
		done <- r
	}()
	return run, done
}

// finishSlow releases test.slowline and checks that the run ended with
// the step's end on record.
func (h *harness) finishSlow(t *testing.T, run *state.Run, done chan *state.Run) {
	slowLine.Lock()
	close(slowLine.release)
	slowLine.Unlock()
	r := <-done
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, state.StepSucceeded, h.steps(run.ID)["slow"].Status, "its end after its start")
}
