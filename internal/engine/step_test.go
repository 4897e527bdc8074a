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

// retry.attempts counts every call, the first included.
func TestRetryAttemptsIsTheTotalNumberOfCalls(t *testing.T) {
	cases := []struct {
		name       string
		attempts   int
		fails      int
		wantCalls  int
		wantStatus state.RunStatus
	}{
		{name: "a step that keeps failing is called attempts times", attempts: 3, fails: 10, wantCalls: 3, wantStatus: state.RunFailed},
		{name: "attempts 1 means no retry", attempts: 1, fails: 1, wantCalls: 1, wantStatus: state.RunFailed},
		{name: "the last allowed attempt may succeed", attempts: 3, fails: 2, wantCalls: 3, wantStatus: state.RunSucceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			r, _ := h.run(`
version: 1
name: attempts
steps:
  - id: flaky
    uses: test.flaky
    with: {key: attempts, fails: `+itoa(tc.fails)+`}
    retry: {attempts: `+itoa(tc.attempts)+`, delay: 1s}
`, nil)
			require.NotNil(t, r)
			assert.Equal(t, tc.wantStatus, r.Status)
			assert.Equal(t, tc.wantCalls, testProbe.count("attempts"), "calls")
			assert.Equal(t, tc.wantCalls, h.steps(r.ID)["flaky"].Attempts, "attempts recorded")
			assert.Len(t, h.clock.Sleeps(), tc.wantCalls-1, "one delay before each retry")
		})
	}
}

// Delays grow by backoff, capped by max_delay when there is one.
func TestRetryDelays(t *testing.T) {
	cases := []struct {
		name  string
		retry string
		fails int
		check func(t *testing.T, sleeps []time.Duration)
	}{
		{
			name:  "without max_delay the delay keeps growing",
			retry: "{attempts: 4, delay: 1s, backoff: 3}",
			fails: 3,
			check: func(t *testing.T, sleeps []time.Duration) {
				assert.Equal(t, []time.Duration{time.Second, 3 * time.Second, 9 * time.Second}, sleeps)
			},
		},
		{
			name:  "a backoff that outgrows any duration stays at the longest delay",
			retry: "{attempts: 4, delay: 1000d, backoff: 100}",
			fails: 3,
			check: func(t *testing.T, sleeps []time.Duration) {
				require.Len(t, sleeps, 3)
				assert.Equal(t, 1000*24*time.Hour, sleeps[0])
				assert.Greater(t, sleeps[1], sleeps[0], "the delay grew")
				assert.Equal(t, sleeps[1], sleeps[2], "and stopped growing, never wrapping around")
			},
		},
		{
			name:  "jitter of the shortest delays",
			retry: "{attempts: 3, delay: 3ns, jitter: true}",
			fails: 2,
			check: func(t *testing.T, sleeps []time.Duration) {
				require.Len(t, sleeps, 2)
				for _, d := range sleeps {
					assert.GreaterOrEqual(t, d, time.Duration(1))
					assert.LessOrEqual(t, d, 3*time.Nanosecond)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			r, err := h.run(`
version: 1
name: delays
steps:
  - id: flaky
    uses: test.flaky
    with: {key: delays, fails: `+itoa(tc.fails)+`}
    retry: `+tc.retry+`
`, nil)
			require.NoError(t, err)
			assert.Equal(t, state.RunSucceeded, r.Status)
			tc.check(t, h.clock.Sleeps())
		})
	}
}

// On the real clock, a retry waits its delay.
func TestRetryWaitsOnTheRealClock(t *testing.T) {
	testProbe.reset()
	h := newHarness(t, func(o *engine.Options) { o.Clock = nil })
	start := time.Now()
	r, err := h.run(`
version: 1
name: realclock
steps:
  - id: flaky
    uses: test.flaky
    with: {key: realclock, fails: 1}
    retry: {attempts: 2, delay: 30ms}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

// A run that stopped while a step waited for its next attempt waits only
// the rest of the delay when resumed, then makes that attempt.
func TestAResumedRetryWaitsTheRestOfItsDelay(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: resume-delay
steps:
  - id: flaky
    uses: test.flaky
    with: {key: resume-delay}
    retry: {attempts: 3, delay: 10s}
`)
	ctx := context.Background()
	r, err := h.engine.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	// What a process leaves when it stops 4s into the 10s delay after
	// attempt 1 failed.
	now := h.clock.Now()
	r.Status, r.StartedAt = state.RunRunning, now.Add(-5*time.Second)
	require.NoError(t, h.store.SaveRun(ctx, r))
	require.NoError(t, h.store.SaveSteps(ctx, []*state.StepRecord{{
		RunID: r.ID, ID: "flaky", Status: state.StepRunning, Attempts: 1,
		StartedAt: now.Add(-5 * time.Second), NextAttemptAt: now.Add(6 * time.Second),
		Error: &state.ErrorRecord{Code: "unavailable", Message: "flaky failure"},
	}}))

	r, err = h.engine.Resume(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, []time.Duration{6 * time.Second}, h.clock.Sleeps())
	assert.Equal(t, 1, testProbe.count("resume-delay"), "the second attempt was made")
	assert.Equal(t, 2, h.steps(r.ID)["flaky"].Attempts)
}

// A step with `needs` is held back by a need that did not succeed: it is
// skipped, with the reason, unless a status function in its `if` decides.
func TestNeedsThatDidNotSucceedSkipTheirDependents(t *testing.T) {
	cases := []struct {
		name       string
		need       string
		dependent  string
		wantStatus state.StepStatus
		wantWhy    string
	}{
		{
			name:       "a skipped need",
			need:       `{id: a, uses: log, if: "${{ inputs.go }}", with: {message: a}}`,
			dependent:  `{id: b, uses: log, needs: [a], with: {message: b}}`,
			wantStatus: state.StepSkipped, wantWhy: "needed step a was skipped",
		},
		{
			name:       "a failed need",
			need:       `{id: a, uses: fail, with: {message: boom}}`,
			dependent:  `{id: b, uses: log, needs: [a], with: {message: b}}`,
			wantStatus: state.StepSkipped, wantWhy: "needed step a failed",
		},
		{
			name:       "a need that failed with continue_on_error does not hold it back",
			need:       `{id: a, uses: fail, continue_on_error: true, with: {message: boom}}`,
			dependent:  `{id: b, uses: log, needs: [a], with: {message: b}}`,
			wantStatus: state.StepSucceeded,
		},
		{
			name:       "a status function decides",
			need:       `{id: a, uses: fail, with: {message: boom}}`,
			dependent:  `{id: b, uses: log, needs: [a], if: "${{ failure() }}", with: {message: b}}`,
			wantStatus: state.StepSucceeded,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r, _ := h.run(`
version: 1
name: needs
inputs:
  go: {type: boolean, default: false}
steps:
  - `+tc.need+`
  - {id: other, uses: log, needs: [], with: {message: other}}
  - `+tc.dependent+`
`, nil)
			require.NotNil(t, r)
			recs := h.steps(r.ID)
			assert.Equal(t, tc.wantStatus, recs["b"].Status)
			if tc.wantWhy != "" {
				var why []string
				for _, ev := range h.stored(r.ID, "step.skipped") {
					if ev.Step == "b" {
						why = append(why, ev.Message)
					}
				}
				assert.Equal(t, []string{tc.wantWhy}, why)
			}
		})
	}
}

// The status functions of finally steps tell how the run ended.
func TestStatusFunctionsInFinallyTellHowTheRunEnded(t *testing.T) {
	cases := []struct {
		name string
		main string
		// cancel cancels the run once its main step started.
		cancel  bool
		wantRan []string
	}{
		{name: "a run that succeeded", main: `{id: main, uses: log, with: {message: hi}}`, wantRan: []string{"on_success", "on_always"}},
		{name: "a run that failed", main: `{id: main, uses: fail, with: {message: boom}}`, wantRan: []string{"on_failure", "on_always"}},
		{name: "a run that was cancelled", main: `{id: main, uses: test.block, with: {key: fin, until_cancelled: true}}`, cancel: true, wantRan: []string{"on_cancel", "on_always"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			pb := h.load(`
version: 1
name: finally
steps:
  - ` + tc.main + `
finally:
  - {id: on_success, uses: log, if: "${{ success() }}", with: {message: ok}}
  - {id: on_failure, uses: log, if: "${{ failure() }}", with: {message: failed}}
  - {id: on_cancel, uses: log, if: "${{ cancelled() }}", with: {message: cancelled}}
  - {id: on_always, uses: log, if: "${{ always() }}", with: {message: always}}
`)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() {
					for testProbe.count("fin") == 0 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			r, _ := h.engine.Run(ctx, pb, engine.StartRequest{})
			require.NotNil(t, r)
			var ran []string
			for _, id := range []string{"on_success", "on_failure", "on_cancel", "on_always"} {
				rec := h.steps(r.ID)[id]
				require.NotNil(t, rec, id)
				if rec.Status == state.StepSucceeded {
					ran = append(ran, id)
				} else {
					assert.Equal(t, state.StepSkipped, rec.Status, id)
				}
			}
			assert.Equal(t, tc.wantRan, ran)
		})
	}
}

// A step's `outputs:` adds named values computed from its result.
func TestStepOutputsAreComputedFromTheResult(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: outputs
steps:
  - id: a
    uses: set
    with: {x: 21}
    outputs:
      double: ${{ result.x * 2 }}
      label: "x=${{ result.x }}"
  - {id: b, uses: set, with: {got: "${{ steps.a.outputs.double }}"}}
`, nil)
	require.NoError(t, err)
	recs := h.steps(r.ID)
	assert.EqualValues(t, 21, recs["a"].Outputs["x"], "the raw result stays")
	assert.EqualValues(t, 42, recs["a"].Outputs["double"])
	assert.Equal(t, "x=21", recs["a"].Outputs["label"])
	assert.EqualValues(t, 42, recs["b"].Outputs["got"])
}

// The items of a for_each are not steps of their own: expressions see the
// step, with its items in its outputs.
func TestForEachItemsAreNotStepsOfTheirOwn(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: items
steps:
  - {id: each, uses: set, for_each: [a, b], with: {v: "${{ item }}"}}
  - {id: after, uses: set, with: {ids: "${{ sort(keys(steps)) }}", second: "${{ steps.each.outputs.items[1].v }}"}}
`, nil)
	require.NoError(t, err)
	out := h.steps(r.ID)["after"].Outputs
	assert.Equal(t, []any{"each"}, out["ids"])
	assert.Equal(t, "b", out["second"])
}

// A step is skipped for a reason its step.skipped event gives: an `if`
// without a status function also needs every earlier step to have
// succeeded in the main list, not in on_failure or finally.
func TestSkippedStepsSayWhy(t *testing.T) {
	cases := []struct {
		name     string
		src      string
		realTime bool // the run's timeout is on the real clock
		wantRan  []string
		wantWhy  map[string]string
		check    func(t *testing.T, recs map[string]*state.StepRecord)
	}{
		{
			name: "a condition that is false",
			src: `
steps:
  - {id: a, uses: log, if: "${{ inputs.go }}", with: {message: a}}
  - {id: b, uses: log, if: "${{ !inputs.go }}", with: {message: b}}
`,
			wantRan: []string{"b"},
			wantWhy: map[string]string{"a": "condition is false"},
		},
		{
			name: "an earlier step failed",
			src: `
steps:
  - {id: boom, uses: fail, with: {message: boom}}
  - {id: plain, uses: log, with: {message: plain}}
  - {id: cond, uses: log, if: "${{ !inputs.go }}", with: {message: cond}}
on_failure:
  - {id: handler, uses: log, if: "${{ !inputs.go }}", with: {message: handler}}
`,
			wantRan: []string{"handler"},
			wantWhy: map[string]string{"plain": "an earlier step failed", "cond": "condition is false"},
		},
		{
			name: "the run timed out",
			// A second, not 50 ms: under a loaded CI the timeout fired
			// before the slow step started, which was then skipped too.
			src: `
timeout: 1s
steps:
  - {id: slow, uses: test.block, with: {key: slow, until_cancelled: true}}
  - {id: after, uses: log, with: {message: after}}
`,
			realTime: true,
			wantWhy:  map[string]string{"after": "run timed out"},
			check: func(t *testing.T, recs map[string]*state.StepRecord) {
				require.Equal(t, state.StepFailed, recs["slow"].Status)
				assert.Equal(t, "timeout", recs["slow"].Error.Code)
				assert.Contains(t, recs["slow"].Error.Message, "run timed out", "the step that ran says it was the run's timeout")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t, func(o *engine.Options) {
				if tc.realTime {
					o.Clock = nil
				}
			})
			r, _ := h.run(`
version: 1
name: why
inputs:
  go: {type: boolean, default: false}
`+tc.src, nil)
			require.NotNil(t, r)
			var ran []string
			for id, rec := range h.steps(r.ID) {
				if rec.Status == state.StepSucceeded {
					ran = append(ran, id)
				}
			}
			assert.ElementsMatch(t, tc.wantRan, ran)
			why := map[string]string{}
			for _, ev := range h.stored(r.ID, "step.skipped") {
				why[ev.Step] = ev.Message
			}
			assert.Equal(t, tc.wantWhy, why)
			if tc.check != nil {
				tc.check(t, h.steps(r.ID))
			}
		})
	}
}

// A for_each whose item failed fails with that item's error.
func TestAFailedItemFailsItsForEachWithItsError(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: item-error
steps:
  - id: each
    uses: test.flaky
    for_each: [a, b, c]
    with: {key: "item-${{ item }}", fails: "${{ item == 'b' ? 1 : 0 }}", code: conflict}
`, nil)
	require.Error(t, err)
	rec := h.steps(r.ID)["each"]
	assert.Equal(t, state.StepFailed, rec.Status)
	require.NotNil(t, rec.Error)
	assert.Equal(t, "conflict", rec.Error.Code)
	assert.Equal(t, "flaky failure item-b", rec.Error.Message)
	assert.Equal(t, "step each: flaky failure item-b", r.Error.Message)
}
