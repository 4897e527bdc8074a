package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// chain is a -> b -> c where c fails on its first call: c's key carries
// b's output, so c's calls show which outputs of b it saw.
const chain = `
version: 1
name: chain
steps:
  - {id: a, uses: test.flaky, with: {key: "%[1]s-a"}}
  - {id: b, uses: test.flaky, with: {key: "%[1]s-b"}}
  - {id: c, uses: test.flaky, with: {key: "%[1]s-c-${{ steps.b.outputs.calls }}", fails: 1, code: failed}}
on_failure:
  - {id: alert, uses: test.flaky, with: {key: "%[1]s-alert"}}
`

func failedRun(t *testing.T, h *harness, src string) *state.Run {
	t.Helper()
	r, err := h.run(src, nil)
	require.Error(t, err)
	require.Equal(t, state.RunFailed, r.Status)
	return r
}

func (h *harness) retry(runID, from string) *state.Run {
	h.t.Helper()
	r, pb, err := h.engine.Retry(context.Background(), runID, from)
	require.NoError(h.t, err)
	r, _ = h.engine.Execute(context.Background(), pb, r)
	return r
}

func TestRetryFromTheFailedStepReusesTheStepsBeforeIt(t *testing.T) {
	h := newHarness(t)
	old := failedRun(t, h, strings.ReplaceAll(chain, "%[1]s", "r1"))

	r, pb, err := h.engine.Retry(context.Background(), old.ID, "")
	require.NoError(t, err)
	assert.Equal(t, state.RunPending, r.Status)
	assert.NotEqual(t, old.ID, r.ID)
	assert.Equal(t, old.ID, r.RetryOf)
	assert.Equal(t, "c", r.RetryFrom, "an empty from is the first step that did not succeed")
	assert.Equal(t, old.Hash, r.Hash)
	evs, err := h.store.Events(context.Background(), r.ID, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, "run.created", evs[0].Type)
	assert.Contains(t, evs[0].Message, "retries run "+old.ID+" from step c")

	r, err = h.engine.Execute(context.Background(), pb, r)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 1, testProbe.count("r1-a"), "a is not run again")
	assert.Equal(t, 1, testProbe.count("r1-b"), "b is not run again")
	assert.Equal(t, 2, testProbe.count("r1-c-1"), "c ran again with b's outputs from the first run")
	assert.Equal(t, 1, testProbe.count("r1-alert"), "on_failure ran for the failed run only")

	recs := h.steps(r.ID)
	assert.Equal(t, h.steps(old.ID)["b"].Outputs, recs["b"].Outputs)
	assert.Equal(t, h.steps(old.ID)["b"].EndedAt, recs["b"].EndedAt, "the reused record is copied as it is")
	assert.Equal(t, state.StepSucceeded, recs["c"].Status)
	assert.Equal(t, []string{"step.reused a", "step.reused b"}, h.eventOrder("step.reused"))
	assert.Equal(t, state.RunFailed, mustRun(t, h, old.ID).Status, "the old run is left as it was")
}

func TestRetryFromAnEarlierStepRunsItAndEverythingAfter(t *testing.T) {
	h := newHarness(t)
	old := failedRun(t, h, strings.ReplaceAll(chain, "%[1]s", "r2"))

	r := h.retry(old.ID, "b")
	assert.Equal(t, 1, testProbe.count("r2-a"), "a is reused")
	assert.Equal(t, 2, testProbe.count("r2-b"), "b runs again")
	assert.Equal(t, 1, testProbe.count("r2-c-2"), "c runs again, after the new b")
	assert.Equal(t, state.RunFailed, r.Status, "c fails on the first call of its new key")
	assert.Equal(t, []string{"step.reused a"}, h.eventOrder("step.reused"))
}

func TestRetryRunsAgainWhatDependsOnTheStepThroughNeeds(t *testing.T) {
	h := newHarness(t)
	// report is written before c but needs it: it runs after c, and a
	// retry from c must run it again even though it succeeded.
	old := failedRun(t, h, `
version: 1
name: dag
steps:
  - {id: a, uses: test.flaky, with: {key: r3-a}}
  - {id: report, needs: [c], if: always(), uses: test.flaky, with: {key: r3-report}}
  - {id: side, needs: [], uses: test.flaky, with: {key: r3-side}}
  - {id: b, needs: [a], uses: test.flaky, with: {key: r3-b}}
  - {id: c, needs: [b], uses: test.flaky, with: {key: r3-c, fails: 1, code: failed}}
`)
	require.Equal(t, state.StepSucceeded, h.steps(old.ID)["report"].Status)

	r := h.retry(old.ID, "c")
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 1, testProbe.count("r3-a"))
	assert.Equal(t, 1, testProbe.count("r3-side"), "an independent branch written before c is reused")
	assert.Equal(t, 1, testProbe.count("r3-b"))
	assert.Equal(t, 2, testProbe.count("r3-c"))
	assert.Equal(t, 2, testProbe.count("r3-report"), "report needs c, so it runs again")
}

func TestRetryReusesTheItemsOfAForEachStep(t *testing.T) {
	h := newHarness(t)
	old := failedRun(t, h, `
version: 1
name: fan
steps:
  - {id: fan, uses: test.flaky, for_each: [x, y, z], with: {key: "r4-fan-${{ item }}"}}
  - {id: last, uses: test.flaky, with: {key: "r4-last-${{ steps.fan.outputs.count }}", fails: 1, code: failed}}
`)
	r := h.retry(old.ID, "last")
	assert.Equal(t, state.RunSucceeded, r.Status)
	for _, k := range []string{"x", "y", "z"} {
		assert.Equal(t, 1, testProbe.count("r4-fan-"+k), "item %s is not run again", k)
	}
	assert.Equal(t, 2, testProbe.count("r4-last-3"))
	recs := h.steps(r.ID)
	for _, id := range []string{"fan", "fan[0]", "fan[1]", "fan[2]"} {
		require.Contains(t, recs, id)
		assert.Equal(t, state.StepSucceeded, recs[id].Status)
	}
}

func TestRetryRunsAStepBeforeFromThatDidNotSucceed(t *testing.T) {
	h := newHarness(t)
	// a fails but continues; retrying from c runs a again (it did not
	// succeed) and reuses b. (b needs a so that a has run when c fails: a
	// step that has not started by then is skipped.)
	old := failedRun(t, h, `
version: 1
name: partial
steps:
  - {id: a, continue_on_error: true, uses: test.flaky, with: {key: r5-a, fails: 1, code: failed}}
  - {id: b, needs: [a], uses: test.flaky, with: {key: r5-b}}
  - {id: c, needs: [b], uses: test.flaky, with: {key: r5-c, fails: 1, code: failed}}
`)
	r := h.retry(old.ID, "c")
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 2, testProbe.count("r5-a"))
	assert.Equal(t, 1, testProbe.count("r5-b"))
	assert.Equal(t, 2, testProbe.count("r5-c"))
}

func TestRetryDecidesAgainASkipTheRunsFailureMade(t *testing.T) {
	h := newHarness(t)
	// a and b start together and c, after b, fails. On a loaded machine c
	// can fail before a's goroutine decides whether a runs: a is then
	// skipped ("an earlier step failed"). The old run's records are made
	// to say so, as that machine leaves them; a retry from c runs a, whose
	// skip came from the failure the retry runs again.
	old := failedRun(t, h, `
version: 1
name: lateskip
steps:
  - {id: a, uses: test.flaky, with: {key: r12-a}}
  - {id: b, needs: [], uses: test.flaky, with: {key: r12-b}}
  - {id: c, needs: [b], uses: test.flaky, with: {key: r12-c, fails: 1, code: failed}}
`)
	ctx := context.Background()
	a := h.steps(old.ID)["a"]
	a.Status, a.Attempts, a.Outputs, a.StartedAt = state.StepSkipped, 0, nil, time.Time{}
	require.NoError(t, h.store.SaveStep(ctx, a, state.Event{Type: "step.skipped", Step: "a", Message: "an earlier step failed"}))
	calls := testProbe.count("r12-a")

	r := h.retry(old.ID, "c")
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, state.StepSucceeded, h.steps(r.ID)["a"].Status)
	assert.Equal(t, calls+1, testProbe.count("r12-a"), "a ran in the retry")
	assert.Equal(t, 1, testProbe.count("r12-b"), "b is reused")
	assert.Equal(t, []string{"step.reused b"}, h.eventOrder("step.reused"))
}

func TestRetrySkipsAgainAStepItsConditionSkipped(t *testing.T) {
	h := newHarness(t)
	old := failedRun(t, h, `
version: 1
name: ownskip
steps:
  - {id: a, if: "${{ 1 > 2 }}", uses: test.flaky, with: {key: r13-a}}
  - {id: b, uses: test.flaky, with: {key: r13-b}}
  - {id: c, uses: test.flaky, with: {key: r13-c, fails: 1, code: failed}}
`)
	require.Equal(t, state.StepSkipped, h.steps(old.ID)["a"].Status)
	r := h.retry(old.ID, "")
	assert.Equal(t, "c", r.RetryFrom, "a retry with no step named starts after the skip")
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, state.StepSkipped, h.steps(r.ID)["a"].Status, "decided again, and skipped again")
	assert.Zero(t, testProbe.count("r13-a"))
	assert.Equal(t, 1, testProbe.count("r13-b"))
}

func TestRetryGivesARerunMutatingStepANewIntent(t *testing.T) {
	h := newHarness(t)
	old := failedRun(t, h, `
version: 1
name: mutate
steps:
  - {id: mk, uses: test.create, with: {name: r6-res}}
  - {id: mk2, uses: test.create, with: {name: r6-res2}}
  - {id: c, uses: test.flaky, with: {key: r6-c, fails: 1, code: failed}}
`)
	r := h.retry(old.ID, "mk2")
	assert.Equal(t, state.RunSucceeded, r.Status)
	testProbe.mu.Lock()
	assert.Equal(t, 1, testProbe.creates["r6-res"], "the reused mutating step is not called again")
	assert.Equal(t, 2, testProbe.creates["r6-res2"], "the rerun mutating step is a new attempt, not a reconcile")
	testProbe.mu.Unlock()
	assert.Empty(t, h.eventOrder("step.reconciled"))
	in, err := h.store.GetIntent(context.Background(), r.ID, "mk2")
	require.NoError(t, err)
	assert.Equal(t, r.ID+"/mk2", in.Key)
	_, err = h.store.GetIntent(context.Background(), r.ID, "mk")
	assert.Error(t, err, "a reused step records no intent in the new run")
}

func TestRetryAfterACrashBeforeTheCopyDoesNotRunReusedSteps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create func(h *harness, old *state.Run) string
	}{
		{"when the retry was created but never executed", func(h *harness, old *state.Run) string {
			r, _, err := h.engine.Retry(context.Background(), old.ID, "c")
			require.NoError(h.t, err)
			return r.ID
		}},
		{"when the process died between the run's creation and the copy", func(h *harness, old *state.Run) string {
			// What Retry's first transaction leaves behind.
			r := *old
			r.ID, r.RetryOf, r.RetryFrom = old.ID+"-retry", old.ID, "c"
			r.Status, r.Error, r.StartedAt, r.EndedAt = state.RunPending, nil, time.Time{}, time.Time{}
			require.NoError(h.t, h.store.CreateRun(context.Background(), &r, state.Event{Type: "run.created"}))
			require.Empty(h.t, h.steps(r.ID))
			return r.ID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			key := "r7-" + strings.ReplaceAll(tc.name, " ", "")[:12]
			old := failedRun(t, h, strings.ReplaceAll(chain, "%[1]s", key))
			id := tc.create(h, old)

			r, err := h.engine.Resume(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, state.RunSucceeded, r.Status)
			assert.Equal(t, 1, testProbe.count(key+"-a"), "a is not run again")
			assert.Equal(t, 1, testProbe.count(key+"-b"), "b is not run again")
			assert.Equal(t, 2, testProbe.count(key+"-c-1"))
			assert.Equal(t, []string{"step.reused a", "step.reused b"}, h.eventOrder("step.reused"), "copied once")
		})
	}
}

func TestRetryRefuses(t *testing.T) {
	h := newHarness(t)
	ok, err := h.run(`
version: 1
name: fine
steps:
  - {id: a, uses: test.flaky, with: {key: r8-a}}
`, nil)
	require.NoError(t, err)
	failed := failedRun(t, h, `
version: 1
name: ship
steps:
  - {id: build, uses: test.flaky, with: {key: r8-build}}
  - {id: deploy, uses: test.flaky, with: {key: r8-deploy, fails: 1, code: failed}}
on_failure:
  - {id: alert, uses: test.flaky, with: {key: r8-alert}}
`)

	for _, tc := range []struct {
		name, run, from string
		code            fault.Code
		msg             string
	}{
		{"a run that succeeded", ok.ID, "", fault.Conflict, "is succeeded; only a failed or cancelled run can be retried"},
		{"a run that does not exist", "nope", "", fault.NotFound, `no run "nope"`},
		{"a step the playbook does not have", failed.ID, "deplyo", fault.Invalid, `has no step "deplyo"; did you mean "deploy"?`},
		{"an on_failure step", failed.ID, "alert", fault.Invalid, "on_failure or finally"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, pb, err := h.engine.Retry(context.Background(), tc.run, tc.from)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Nil(t, pb)
			assert.Equal(t, tc.code, fault.CodeOf(err))
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func mustRun(t *testing.T, h *harness, id string) *state.Run {
	t.Helper()
	r, err := h.store.GetRun(context.Background(), id)
	require.NoError(t, err)
	return r
}

func TestRetryDecidesAgainASkipThatDependedOnAStepThatRunsAgain(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, func(o *engine.Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	// a fails but continues, so b (which wants a to succeed) is skipped;
	// retrying from c runs a again, and b with it: its skip no longer holds.
	old := failedRun(t, h, `
version: 1
name: reskip
steps:
  - {id: a, continue_on_error: true, uses: test.flaky, with: {key: r9-a, fails: 1, code: failed}}
  - {id: b, needs: [a], if: "${{ steps.a.status == 'succeeded' }}", uses: test.flaky, with: {key: r9-b}}
  - {id: c, uses: test.flaky, with: {key: r9-c, fails: 1, code: failed}}
`)
	require.Equal(t, state.StepSkipped, h.steps(old.ID)["b"].Status)
	r := h.retry(old.ID, "c")
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 2, testProbe.count("r9-a"))
	assert.Equal(t, 1, testProbe.count("r9-b"), "b ran once a succeeded")
	assert.Equal(t, state.StepSucceeded, h.steps(r.ID)["b"].Status)
	assert.Empty(t, logs.String(), "the retry logged no warning")
}
