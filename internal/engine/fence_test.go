package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// A fenced engine checks its lease before each step attempt: once the
// check fails (the replica did not renew its lease in time), no further
// step starts, nothing more is written, finally does not run and the
// run's execution returns a state.ErrFenced.
func TestNoStepStartsOnceTheLeaseCheckFails(t *testing.T) {
	var checks atomic.Int32
	h := newHarness(t, func(o *engine.Options) {
		o.Fence, o.Process = true, "replica-a/1"
		o.LeaseCheck = func() error {
			if checks.Add(1) > 1 {
				return errors.New("lease not renewed in time (test)")
			}
			return nil
		}
	})
	out := filepath.Join(t.TempDir(), "out")
	pb := h.load(`version: 1
name: chain
steps:
  - {id: one, uses: shell, with: {command: "echo one >> ` + out + `"}}
  - {id: two, uses: shell, with: {command: "echo two >> ` + out + `"}}
  - {id: three, uses: shell, with: {command: "echo three >> ` + out + `"}}
finally:
  - {id: last, uses: shell, with: {command: "echo finally >> ` + out + `"}}
`)
	ctx := context.Background()
	r, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	r.Owner = "replica-a/1" // claimed, as a replica claims a run before it executes it
	require.NoError(t, h.store.SaveRun(ctx, r))
	_, err = h.engine.Execute(ctx, pb, r)
	require.ErrorIs(t, err, state.ErrFenced)

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, strings.Fields(string(b)), "no step after the failed check, and no finally")
	stored, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, stored.Status, "the run is left as it was, for the replica that takes it over")
	assert.Nil(t, h.steps(r.ID)["two"], "step two was not recorded")
	assert.False(t, h.engine.Executing(r.ID))
}
