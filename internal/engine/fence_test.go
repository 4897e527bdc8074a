package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// testLease is an engine.Lease the test lapses and renews.
type testLease struct {
	mu      sync.Mutex
	lapsed  chan struct{}
	checks  atomic.Int32
	onLapse func() // called at the check that finds it lapsed
}

func (l *testLease) Lapse() <-chan struct{} {
	l.checks.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed != nil && l.onLapse != nil {
		go l.onLapse()
		l.onLapse = nil
	}
	return l.lapsed
}

func (l *testLease) lapse() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapsed = make(chan struct{})
}

func (l *testLease) renew() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.lapsed)
	l.lapsed = nil
}

// A fenced engine measures its lease before each step attempt: while it
// lapsed no step starts, and once its host stops the runs (Engine.Fence:
// the replica did not renew its lease before another could take its
// runs), no further step starts, nothing more is written, finally does not
// run and the run's execution returns a state.ErrFenced.
func TestNoStepStartsOnceTheLeaseLapsed(t *testing.T) {
	lease := &testLease{}
	h := newHarness(t, func(o *engine.Options) {
		o.Host.Fence, o.Process, o.Host.Lease = true, "replica-a/1", lease
		observe := o.Observer.Event
		o.Observer.Event = func(runID string, ev state.Event) { // it lapses once step one ended
			observe(runID, ev)
			if ev.Type == "step.succeeded" && ev.Step == "one" {
				lease.lapse()
			}
		}
	})
	lease.onLapse = func() { h.engine.Fence(errors.New("lease not renewed in time (test)")) }
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
	lease := &testLease{}
	ended := make(chan struct{})
	h := newHarness(t, func(o *engine.Options) {
		o.Host.Fence, o.Process, o.Host.Lease = true, "replica-a/1", lease
		observe := o.Observer.Event
		o.Observer.Event = func(runID string, ev state.Event) {
			observe(runID, ev)
			switch {
			case ev.Type == "step.started" && ev.Step == "one":
				lease.lapse() // while step one executes
			case ev.Type == "step.succeeded" && ev.Step == "one":
				close(ended)
			}
		}
	})
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
	require.Eventually(t, func() bool { return lease.checks.Load() >= 2 }, 10*time.Second, 5*time.Millisecond,
		"step two measured the lease (step one did before it lapsed)")
	b, _ := os.ReadFile(out)
	assert.Equal(t, []string{"one"}, strings.Fields(string(b)), "step two waits for the lease")
	lease.renew()
	require.NoError(t, <-done)
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", "finally"}, strings.Fields(string(b)), "nothing executed twice")
	stored, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, stored.Status)
}
