package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// While a shell step runs (it printed a line and waits on a fifo), its
// record in the store says running, attempt 1, with its start, and the
// line it printed is readable from the store; the step before it is on
// record succeeded (its end went with this step's start). Before, a
// running step had no record until it ended: runs show said "no steps
// have run" and the API and the UI showed it not started.
func TestARunningStepIsOnRecordWithItsLinesWhileItRuns(t *testing.T) {
	stores := map[string]func(t *testing.T) state.Store{
		"bolt": func(t *testing.T) state.Store {
			st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"postgres": func(t *testing.T) state.Store {
			st, err := postgres.Open(context.Background(), pgtest.DB(t), postgres.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			dir := t.TempDir()
			fifo := filepath.Join(dir, "go")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			pb, err := playbook.Parse(filepath.Join(dir, "drain.yaml"), []byte(fmt.Sprintf(`version: 1
name: drain
steps:
  - {id: cordon, uses: shell, with: {command: "true"}}
  - {id: drain, uses: shell, with: {command: "echo evicting pod-1; read x < %s; echo done"}}
  - {id: after, uses: shell, with: {command: "true"}}
`, fifo)), playbook.LoadOptions{})
			require.NoError(t, err)
			e := engine.New(engine.Options{Store: st, Environ: os.Environ()})
			run, err := e.Start(ctx, pb, engine.StartRequest{})
			require.NoError(t, err)
			done := make(chan *state.Run, 1)
			go func() {
				r, err := e.Execute(ctx, pb, run)
				assert.NoError(t, err)
				done <- r
			}()

			var drain *state.StepRecord
			var lines []string
			until(t, "the running step and its line in the store", func() bool {
				recs, err := st.Steps(ctx, run.ID)
				require.NoError(t, err)
				byID := map[string]*state.StepRecord{}
				for _, rec := range recs {
					byID[rec.ID] = rec
				}
				drain = byID["drain"]
				out, err := st.(state.StepOutput).Output(ctx, run.ID, state.OutputFilter{Step: "drain"})
				require.NoError(t, err)
				lines = lines[:0]
				for _, l := range out {
					lines = append(lines, l.Text)
				}
				return drain != nil && len(lines) > 0
			})
			assert.Equal(t, state.StepRunning, drain.Status)
			assert.Equal(t, 1, drain.Attempts)
			assert.False(t, drain.StartedAt.IsZero(), "its start is on record")
			assert.True(t, drain.EndedAt.IsZero())
			assert.Equal(t, []string{"evicting pod-1"}, lines)
			recs, err := st.Steps(ctx, run.ID)
			require.NoError(t, err)
			statuses := map[string]state.StepStatus{}
			for _, rec := range recs {
				statuses[rec.ID] = rec.Status
			}
			assert.Equal(t, map[string]state.StepStatus{"cordon": state.StepSucceeded, "drain": state.StepRunning}, statuses,
				"the step before is on record succeeded; the step after has not started")
			started, err := st.Events(ctx, run.ID, 0, 0)
			require.NoError(t, err)
			assert.Contains(t, eventTypes(started), "step.started drain")

			require.NoError(t, os.WriteFile(fifo, []byte("go\n"), 0o600))
			r := <-done
			assert.Equal(t, state.RunSucceeded, r.Status)
			recs, err = st.Steps(ctx, run.ID)
			require.NoError(t, err)
			require.Len(t, recs, 3)
			for _, rec := range recs {
				assert.Equal(t, state.StepSucceeded, rec.Status, rec.ID)
				assert.Equal(t, 1, rec.Attempts, rec.ID)
			}
		})
	}
}

// A chain of shell steps costs one commit per step: each step's start is
// written with the end of the step before it, the last end with the run's
// own. The events stay in the order they happened.
func TestAChainOfStepsOnRecordWhileRunningCostsOneWritePerStep(t *testing.T) {
	var w *writeCounter
	h := newHarness(t, func(o *engine.Options) {
		w = &writeCounter{Store: o.Store}
		o.Store = w
	})
	r, err := h.run(`
version: 1
name: chain
steps:
  - {id: a, uses: shell, with: {command: "true"}}
  - {id: b, uses: shell, with: {command: "true"}}
  - {id: c, uses: set, with: {x: 1}}
  - {id: d, uses: shell, with: {command: "true"}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 5, w.writes, "the run's start, the starts of a, b and d, the run's end")
	assert.Equal(t, []string{
		"run.created", "run.started",
		"step.started a", "step.succeeded a", "step.started b", "step.succeeded b",
		"step.started c", "step.succeeded c", "step.started d", "step.succeeded d", "run.succeeded",
	}, eventTypes(h.stored(r.ID, "")))
}

// A step record saying running, left by a process that died while the
// step ran (no intent: the step does not mutate), is simply run again
// when the run is resumed: a new attempt, which ends the step.
func TestARunningRecordLeftByADeadProcessIsRunAgainOnResume(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marks := filepath.Join(h.dir, "ran")
	pb := h.load(`
version: 1
name: rerun
steps:
  - {id: first, uses: shell, with: {command: "true"}}
  - {id: long, uses: shell, with: {command: "echo ran >> ` + marks + `"}}
`)
	run, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	// What a process killed during step long left: the run running with
	// its owner gone, first ended, long running in its first attempt.
	now := h.clock.Now()
	run.Status, run.StartedAt, run.Owner = state.RunRunning, now, "gone-host/1"
	require.NoError(t, h.store.SaveRunSteps(ctx, run, []*state.StepRecord{
		{RunID: run.ID, ID: "first", Status: state.StepSucceeded, Attempts: 1, StartedAt: now, EndedAt: now},
		{RunID: run.ID, ID: "long", Status: state.StepRunning, Attempts: 1, StartedAt: now},
	}, state.Event{Time: now, Type: "step.started", Step: "long", Attempt: 1}))

	r, err := h.engine.Resume(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	recs := h.steps(run.ID)
	assert.Equal(t, state.StepSucceeded, recs["long"].Status)
	assert.Equal(t, 2, recs["long"].Attempts, "the interrupted attempt, then this one")
	assert.Equal(t, 1, recs["first"].Attempts, "a finished step is not run again")
	ran, err := os.ReadFile(marks)
	require.NoError(t, err)
	assert.Equal(t, "ran\n", string(ran))
}

// eventTypes lists "type step" of evs, in order.
func eventTypes(evs []state.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = strings.TrimSpace(ev.Type + " " + ev.Step)
	}
	return out
}

// A step whose start cannot be put on record (the store refuses the
// write, as a full disk does) does not start: its process never runs,
// and the run fails saying its state could not be written.
func TestAStepWhoseStartCannotBeWrittenDoesNotStart(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Store = saveStepsFails{o.Store} })
	marker := filepath.Join(h.dir, "ran")
	r, err := h.run(`
version: 1
name: unwritten
steps:
  - {id: touch, uses: shell, with: {command: "touch `+marker+`"}}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Contains(t, r.Error.Message, "could not be written")
	_, statErr := os.Stat(marker)
	assert.True(t, os.IsNotExist(statErr), "the step's process ran although its start was not on record")
}
