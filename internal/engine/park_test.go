package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

func parkAll(o *engine.Options) { o.Host.ParkAfter = 2 * time.Second }

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// restarted is a second engine over the harness's store and clock: what
// a new process sees.
func (h *harness) restarted(opts ...func(*engine.Options)) *engine.Engine {
	h.t.Helper()
	o := engine.Options{
		Store: h.store, Clock: h.clock,
		Host: engine.Host{ParkAfter: 2 * time.Second},
		Playbooks: engine.Playbooks{Parse: func(file string, src []byte) (*playbook.Playbook, error) {
			return playbook.Parse(file, src, playbook.LoadOptions{})
		}},
	}
	for _, f := range opts {
		f(&o)
	}
	return engine.New(o)
}

const longSleep = `
version: 1
name: nap
steps:
  - {id: before, uses: set, with: {n: 1}}
  - {id: nap, uses: sleep, with: {duration: 1h}}
  - {id: after, uses: set, with: {n: 2}}
`

// Under ApprovalParkAll a long sleep parks the run: Execute returns at
// once with the run waiting and its wake time at the sleep's end. A
// process resumed before then parks it again until the same moment (the
// sleep is not restarted); one resumed after it finishes the sleep as
// the same attempt and goes on.
func TestALongSleepParksTheRunAndEndsAtItsFirstDeadlineAcrossARestart(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	start := h.clock.Now()
	r, err := h.run(longSleep, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	got, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, got.Status)
	assert.True(t, start.Add(time.Hour).Equal(got.WakeAt), "wake at the sleep's end, got %s", got.WakeAt)
	assert.False(t, got.AnswerOnly)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepWaiting, recs["nap"].Status)
	assert.Equal(t, 1, recs["nap"].Attempts)
	assert.Nil(t, recs["after"])
	assert.Empty(t, h.clock.Sleeps(), "nothing waited in process")

	// A new process, half-way: the run parks again, same wake time.
	h.clock.advance(30 * time.Minute)
	e2 := h.restarted()
	r, err = e2.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	got, err = h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, start.Add(time.Hour).Equal(got.WakeAt), "the sleep keeps its first deadline, got %s", got.WakeAt)

	// Another, after the end: the sleep ends as attempt 1 and the run goes on.
	h.clock.advance(31 * time.Minute)
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.True(t, r.WakeAt.IsZero())
	recs = h.steps(r.ID)
	assert.Equal(t, state.StepSucceeded, recs["nap"].Status)
	assert.Equal(t, 1, recs["nap"].Attempts, "the resumed sleep is the same attempt")
	assert.Equal(t, "1h", recs["nap"].Outputs["slept"])
	assert.Equal(t, state.StepSucceeded, recs["after"].Status)
}

// A short sleep, and a sleep of a step with its own timeout, wait in
// process: a timeout must still be able to cut the sleep.
func TestShortSleepsAndSleepsUnderAStepTimeoutDoNotPark(t *testing.T) {
	h := newHarness(t, parkAll, func(o *engine.Options) { o.Host.ParkAfter = time.Hour })
	r, err := h.run(`
version: 1
name: short
steps:
  - {id: nap, uses: sleep, with: {duration: 20ms}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)

	h = newHarness(t, parkAll)
	r, err = h.run(`
version: 1
name: bounded
steps:
  - {id: nap, uses: sleep, timeout: 50ms, with: {duration: 1h}}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Equal(t, "timeout", h.steps(r.ID)["nap"].Error.Code)
}

// An approval with a timeout parks the run until the timeout; resumed
// then, on_timeout answers it.
func TestAnApprovalTimeoutFiresWhenTheParkedRunWakes(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	start := h.clock.Now()
	r, err := h.run(`
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: go?, timeout: 2h, on_timeout: approve}}
  - {id: after, uses: set, with: {by: "${{ steps.gate.outputs.by }}"}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	got, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, start.Add(2*time.Hour).Equal(got.WakeAt), "wake at the approval's deadline, got %s", got.WakeAt)

	h.clock.advance(2 * time.Hour)
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, true, recs["gate"].Outputs["timed_out"])
	assert.Equal(t, "timeout", recs["after"].Outputs["by"])
}

// The wake time is the earliest of the run's waits and its deadline; a
// run resumed past its deadline fails with a timeout, its waiting steps
// timed out, and finally runs. (The run's deadline is a real-time
// context: this test waits for it, one second.)
func TestAParkedRunWakesAtItsDeadlineAndTimesOut(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	h.clock.now = time.Now()
	start := h.clock.Now()
	r, err := h.run(`
version: 1
name: late
timeout: 1s
steps:
  - {id: gate, uses: approval, with: {message: go?}}
  - {id: nap, uses: sleep, needs: [], with: {duration: 1h}}
finally:
  - {id: bye, uses: set, with: {status: "${{ run.status }}"}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	got, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, start.Add(time.Second).Equal(got.WakeAt), "the deadline comes first, got %s", got.WakeAt)

	time.Sleep(time.Until(got.WakeAt))
	h.clock.now = time.Now()
	r, err = h.restarted().Resume(ctx, r.ID)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Equal(t, "timeout", r.Error.Code)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepFailed, recs["gate"].Status)
	assert.Equal(t, state.StepFailed, recs["nap"].Status)
	assert.Equal(t, "failed", recs["bye"].Outputs["status"])
}

// A run parked by its host, cancelled (CancelNext) and executed again,
// ends cancelled as an executing run would: its waiting steps cancelled,
// finally run. An answer says that it decided the step, so that the host
// executes the run again (internal/runner wakes it).
func TestAParkedRunCancelledAtItsNextExecutionAndAnAnswerThatDecides(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	src := `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: go?}}
finally:
  - {id: bye, uses: set, with: {status: "${{ run.status }}"}}
`
	r, err := h.run(src, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	stored, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, stored.WakeAt.IsZero())
	assert.True(t, stored.AnswerOnly, "only an answer wakes it, and the record says so")
	assert.False(t, h.engine.Cancel(r.ID, nil), "a parked run does not execute: its host cancels it")
	h.engine.CancelNext(r.ID, nil)
	r, err = h.engine.Resume(ctx, r.ID)
	require.Error(t, err)
	assert.Equal(t, state.RunCancelled, r.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepCancelled, recs["gate"].Status)
	assert.Equal(t, "cancelled", recs["bye"].Outputs["status"])

	r, err = h.run(src, nil)
	require.NoError(t, err)
	decided, err := h.engine.Answer(ctx, r.ID, "gate", state.Approval{Approved: true, By: "alice"})
	require.NoError(t, err)
	assert.True(t, decided, "the one approval required decides the step")
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
}

// A parked run keeps its concurrency key, also across a restart.
func TestAParkedRunKeepsItsConcurrencyKey(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	src := `
version: 1
name: keyed
concurrency: {key: prod, on_busy: skip}
steps:
  - {id: nap, uses: sleep, with: {duration: 1h}}
`
	r, err := h.run(src, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	require.NoError(t, h.restarted().ReleaseStaleLocks(ctx))
	second, err := h.run(src, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSkipped, second.Status, "the parked run holds the key")

	h.clock.advance(time.Hour)
	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	third, err := h.run(src, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, third.Status, "the key is free once the run ended")
}

// A retry's delay parks the run too: the attempt that failed is kept,
// the run wakes when the next attempt is due (not before: woken early it
// parks again), and the next attempt has the next number.
func TestARetryDelayParksTheRunUntilTheNextAttempt(t *testing.T) {
	ctx := context.Background()
	testProbe.reset()
	h := newHarness(t, parkAll)
	start := h.clock.Now()
	r, err := h.run(`
version: 1
name: flaky
steps:
  - {id: call, uses: test.flaky, retry: {attempts: 3, delay: 1h}, with: {key: park-retry, fails: 2}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	got, err := h.store.GetRun(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, start.Add(time.Hour).Equal(got.WakeAt), "wake when attempt 2 is due, got %s", got.WakeAt)
	rec := h.steps(r.ID)["call"]
	assert.Equal(t, state.StepWaiting, rec.Status)
	assert.Equal(t, 1, rec.Attempts)
	assert.Equal(t, 1, testProbe.count("park-retry"))
	assert.Empty(t, h.clock.Sleeps(), "nothing waited in process")

	h.clock.advance(10 * time.Minute) // woken early: parks again, no attempt
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	assert.Equal(t, 1, testProbe.count("park-retry"))
	assert.True(t, start.Add(time.Hour).Equal(r.WakeAt), "got %s", r.WakeAt)

	h.clock.advance(50 * time.Minute)
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status, "attempt 2 failed too")
	assert.Equal(t, 2, h.steps(r.ID)["call"].Attempts)

	h.clock.advance(time.Hour)
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	rec = h.steps(r.ID)["call"]
	assert.Equal(t, 3, rec.Attempts)
	assert.EqualValues(t, 3, rec.Outputs["calls"])
	assert.True(t, rec.NextAttemptAt.IsZero())
	assert.True(t, rec.WakeAt.IsZero())
}

// The items of a for_each park each, and the run wakes once for all.
func TestForEachItemsParkAndGoOnTogether(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, parkAll)
	r, err := h.run(`
version: 1
name: fe
steps:
  - {id: nap, uses: sleep, for_each: [a, b], with: {duration: 1h}}
  - {id: after, uses: set, with: {n: "${{ steps.nap.outputs.count }}"}}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepWaiting, recs["nap[0]"].Status)
	assert.Equal(t, state.StepWaiting, recs["nap[1]"].Status)

	h.clock.advance(time.Hour)
	r, err = h.restarted().Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	recs = h.steps(r.ID)
	assert.Equal(t, 1, recs["nap[0]"].Attempts)
	assert.EqualValues(t, 2, recs["after"].Outputs["n"])
}

// A cancel that comes as the run parks is never lost, whichever side of
// the run's leaving it lands on: Cancel either finds the run executing
// and the run notes the cancel for its next execution, or finds it
// parked, and its host notes it (CancelNext, as runner.Host.CancelRun
// does). Either way the next execution ends it cancelled. The cancel is
// made from the run's own "run.waiting" event, in a goroutine of its
// own, so that it races the run's leaving; a full go test ./... under
// load once saw a run stay waiting after such a cancel (issue 27).
func TestACancelAsTheRunParksIsNeverLost(t *testing.T) {
	ctx := context.Background()
	var h *harness
	var eng *engine.Engine
	var wg sync.WaitGroup
	h = newHarness(t, parkAll, func(o *engine.Options) {
		seen := o.Observer.Event
		o.Observer.Event = func(runID string, ev state.Event) {
			seen(runID, ev)
			if ev.Type == "run.waiting" {
				wg.Go(func() {
					if !eng.Cancel(runID, nil) {
						eng.CancelNext(runID, nil)
					}
				})
			}
		}
	})
	eng = h.engine
	src := `
version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: go?}}
`
	const runs = 150
	for i := range runs {
		r, err := h.run(src, nil)
		wg.Wait()
		if r.Status == state.RunWaiting {
			r, err = eng.Resume(ctx, r.ID)
		}
		require.Error(t, err, "run %d", i)
		require.Equal(t, state.RunCancelled, r.Status, "run %d: cancelled as it parked, it must end cancelled at its next execution", i)
	}
}
