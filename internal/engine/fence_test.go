package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// lapseLease has h's engine find its lease lapsed at the next step
// attempt, as a host's lease that was not renewed in time (SetLease with
// a moment past).
func (h *harness) lapseLease() { h.engine.SetLease(time.Now()) }

// renewLease renews h's engine's lease for an hour, as its host does at a
// renewal (SetLease).
func (h *harness) renewLease() { h.engine.SetLease(time.Now().Add(time.Hour)) }

// A fenced engine measures its lease before each step attempt: while it
// lapsed no step starts, and once its host stops the runs (Engine.Fence:
// the replica did not renew its lease before another could take its
// runs), no further step starts, nothing more is written, finally does not
// run and the run's execution returns a state.ErrFenced.
func TestNoStepStartsOnceTheLeaseLapsed(t *testing.T) {
	var h *harness
	h = newHarness(t, func(o *engine.Options) {
		o.Host.Fence, o.Process = true, "replica-a/1"
		observe := o.Observer.Event
		o.Observer.Event = func(runID string, ev state.Event) { // it lapses once step one ended
			observe(runID, ev)
			if ev.Type == "step.succeeded" && ev.Step == "one" {
				h.lapseLease()
				// Its host's timer stops the runs a moment later.
				go h.engine.Fence(errors.New("lease not renewed in time (test)"))
			}
		}
	})
	h.renewLease()
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

// While the lease lapsed, the step executing goes on and what it did is
// written; the next step waits, and starts once the lease is renewed: a
// lapse that ends before the host stops the runs repeats nothing.
func TestALapsedLeaseHoldsTheNextStepUntilItIsRenewed(t *testing.T) {
	ended := make(chan struct{})
	var (
		h    *harness
		logs syncBuffer
	)
	h = newHarness(t, func(o *engine.Options) {
		o.Host.Fence, o.Process = true, "replica-a/1"
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		observe := o.Observer.Event
		o.Observer.Event = func(runID string, ev state.Event) {
			observe(runID, ev)
			switch {
			case ev.Type == "step.started" && ev.Step == "one":
				h.lapseLease() // while step one executes
			case ev.Type == "step.succeeded" && ev.Step == "one":
				close(ended)
			}
		}
	})
	h.renewLease()
	out := filepath.Join(t.TempDir(), "out")
	pb := h.load(`version: 1
name: chain
steps:
  - {id: one, uses: shell, with: {command: "sleep 0.2; echo one >> ` + out + `"}}
  - {id: two, uses: shell, with: {command: "echo two >> ` + out + `"}}
finally:
  - {id: last, uses: shell, with: {command: "echo finally >> ` + out + `"}}
`)
	ctx := context.Background()
	r, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	r.Owner = "replica-a/1"
	require.NoError(t, h.store.SaveRun(ctx, r))
	done := make(chan error, 1)
	go func() {
		_, err := h.engine.Execute(ctx, pb, r)
		done <- err
	}()
	<-ended
	require.Eventually(t, func() bool { return h.steps(r.ID)["one"] != nil }, 10*time.Second, 5*time.Millisecond,
		"step one's end is written while the lease lapsed")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "step attempt held: the lease lapsed") }, 10*time.Second, 5*time.Millisecond,
		"step two measured the lease (step one did before it lapsed)")
	b, _ := os.ReadFile(out)
	assert.Equal(t, []string{"one"}, strings.Fields(string(b)), "step two waits for the lease")
	h.renewLease()
	require.NoError(t, <-done)
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", "finally"}, strings.Fields(string(b)), "nothing executed twice")
	stored, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, stored.Status)
}
