package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// A run queued on a concurrency key starts as soon as a run of this
// process releases the key, not at the next poll (an hour here).
func TestQueuedRunStartsWhenTheKeyIsReleased(t *testing.T) {
	testProbe.reset()
	h := newHarness(t, func(o *engine.Options) {
		o.Clock = nil // the real clock: the poll must not be what wakes it
		o.ApprovalPoll = time.Hour
	})
	pb := h.load(`
version: 1
name: queued
concurrency: {key: the-key, on_busy: queue}
steps:
  - {id: hold, uses: test.block, with: {key: q, hold: 200ms}}
`)
	start := time.Now()
	var wg sync.WaitGroup
	runs := make([]*state.Run, 2)
	for i := range runs {
		wg.Go(func() {
			r, err := h.engine.Run(context.Background(), pb, engine.StartRequest{})
			assert.NoError(t, err)
			runs[i] = r
		})
	}
	wg.Wait()
	require.NotNil(t, runs[0])
	require.NotNil(t, runs[1])
	assert.Equal(t, state.RunSucceeded, runs[0].Status)
	assert.Equal(t, state.RunSucceeded, runs[1].Status)
	assert.Equal(t, 2, testProbe.count("q"))
	assert.Less(t, time.Since(start), 5*time.Second, "the queued run was woken by the release")
}
