package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// A run suspended (a server shutting down) is not ended: it stays running,
// finally does not run, and a resume continues it; the step interrupted
// runs again and the steps before it do not.
func TestSuspendLeavesTheRunToResume(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: suspend
steps:
  - {id: first, uses: log, with: {message: one}}
  - {id: wait, uses: test.block, with: {key: suspend, until_cancelled: true}}
  - {id: after, uses: log, with: {message: two}}
finally:
  - {id: cleanup, uses: log, with: {message: "cleaning after ${{ run.status }}"}}
`)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		for testProbe.count("suspend") == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel(engine.ErrSuspend)
	}()
	r, err := h.engine.Run(ctx, pb, engine.StartRequest{})
	require.ErrorIs(t, err, engine.ErrSuspend)
	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSuspended, got.Status)
	assert.Empty(t, got.Owner)
	assert.Nil(t, got.Error)
	assert.True(t, got.EndedAt.IsZero())
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepSucceeded, recs["first"].Status)
	assert.Equal(t, state.StepCancelled, recs["wait"].Status)
	assert.Nil(t, recs["wait"].Error, "the suspension is not the step's error")
	assert.Nil(t, recs["cleanup"], "finally waits for the real end")
	assert.Contains(t, h.eventOrder("run.suspended"), "run.suspended ")

	// The next process resumes it: first is not run again, wait is; the
	// run then ends (cancelled here) and only then does finally run.
	before := len(h.eventOrder("step.succeeded"))
	go func() {
		for testProbe.count("suspend") < 2 {
			time.Sleep(time.Millisecond)
		}
		h.engine.Cancel(r.ID, nil)
	}()
	r, err = h.engine.Resume(context.Background(), r.ID)
	require.Error(t, err)
	assert.Equal(t, 2, testProbe.count("suspend"), "the interrupted step ran again")
	assert.Equal(t, state.RunCancelled, r.Status)
	assert.Equal(t, []string{"step.succeeded cleanup"}, h.eventOrder("step.succeeded")[before:])
}
