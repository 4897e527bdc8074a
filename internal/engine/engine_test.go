package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

func TestStepsRunInWrittenOrderAndSeeEarlierOutputs(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: order
inputs:
  n: {type: integer, default: 2}
steps:
  - id: a
    uses: set
    with: {x: "${{ inputs.n * 10 }}"}
  - id: b
    uses: set
    with: {y: "${{ steps.a.outputs.x + 1 }}", greeting: "${{ env.GREETING }} world"}
  - id: c
    uses: log
    with: {message: "y is ${{ steps.b.outputs.y }}"}
outputs:
  y: ${{ steps.b.outputs.y }}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, []string{"step.succeeded a", "step.succeeded b", "step.succeeded c"}, h.eventOrder("step.succeeded"))
	recs := h.steps(r.ID)
	assert.EqualValues(t, 21, recs["b"].Outputs["y"])
	assert.Equal(t, "hello world", recs["b"].Outputs["greeting"])
	assert.EqualValues(t, 21, r.Outputs["y"])

	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, got.Status, "the final status is persisted")
}

func TestNeedsMakeADagAndMaxParallelCapsConcurrency(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: dag
max_parallel: 2
steps:
  - {id: a, uses: test.block, needs: [], with: {key: a, hold: 10s, until_running: 2}}
  - {id: b, uses: test.block, needs: [], with: {key: b, hold: 10s, until_running: 2}}
  - {id: c, uses: test.block, needs: [], with: {key: c, hold: 10s, until_running: 2}}
  - {id: d, uses: test.block, needs: [], with: {key: d, hold: 10s, until_running: 2}}
  - {id: join, uses: log, needs: [a, b, c, d], with: {message: joined}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 2, testProbe.maxSeen, "never more than max_parallel steps at once")
	order := h.eventOrder("step.succeeded")
	require.Len(t, order, 5)
	assert.Equal(t, "step.succeeded join", order[4], "join waits for all it needs")
}

func TestIndependentBranchesRunConcurrently(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	_, err := h.run(`
version: 1
name: branches
steps:
  - {id: a, uses: test.block, needs: [], with: {key: a, hold: 10s, until_running: 3}}
  - {id: b, uses: test.block, needs: [], with: {key: b, hold: 10s, until_running: 3}}
  - {id: c, uses: test.block, needs: [], with: {key: c, hold: 10s, until_running: 3}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, testProbe.maxSeen)
}

func TestStepsWithoutNeedsWaitForEveryEarlierStep(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	_, err := h.run(`
version: 1
name: sequential
steps:
  - {id: a, uses: test.block, with: {key: a, hold: 10ms}}
  - {id: b, uses: test.block, with: {key: b, hold: 10ms}}
  - {id: c, uses: test.block, with: {key: c, hold: 10ms}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, testProbe.maxSeen)
	assert.Equal(t, []string{"step.succeeded a", "step.succeeded b", "step.succeeded c"}, h.eventOrder("step.succeeded"))
}

func TestForEachHonoursMaxParallelAndCollectsItemOutputs(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: loop
inputs:
  groups: {type: list, default: [g1, g2, g3, g4, g5, g6]}
steps:
  - id: each
    uses: test.block
    for_each: ${{ inputs.groups }}
    max_parallel: 3
    with: {key: "${{ item }}-${{ index }}", hold: 10s, until_running: 3}
  - id: after
    uses: set
    with:
      count: ${{ steps.each.outputs.count }}
      third: ${{ steps.each.outputs.items[2].key }}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 3, testProbe.maxSeen, "items never exceed max_parallel")
	recs := h.steps(r.ID)
	assert.EqualValues(t, 6, recs["after"].Outputs["count"])
	assert.Equal(t, "g3-2", recs["after"].Outputs["third"])
	for i := 0; i < 6; i++ {
		assert.Equal(t, state.StepSucceeded, recs["each["+itoa(i)+"]"].Status)
	}
}

func TestForEachStopsStartingItemsAfterAFailure(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: loopfail
steps:
  - id: each
    uses: test.flaky
    for_each: [a, b, c, d]
    with: {key: "${{ item }}", fails: "${{ item == 'b' ? 1 : 0 }}", code: failed}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Equal(t, 1, testProbe.count("a"))
	assert.Equal(t, 1, testProbe.count("b"))
	assert.Equal(t, 0, testProbe.count("c"), "no item starts after one failed (max_parallel 1)")
}

func TestRetryWaitsWithBackoffCappedByMaxDelay(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: retry
steps:
  - id: flaky
    uses: test.flaky
    with: {key: backoff, fails: 3}
    retry: {attempts: 5, delay: 1s, backoff: 2, max_delay: 3s}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, h.clock.Sleeps())
	assert.Equal(t, 4, h.steps(r.ID)["flaky"].Attempts)
	assert.Len(t, h.eventOrder("step.retry"), 3)
}

func TestRetryJitterStaysWithinHalfToFullDelay(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	_, err := h.run(`
version: 1
name: jitter
steps:
  - id: flaky
    uses: test.flaky
    with: {key: jitter, fails: 4}
    retry: {attempts: 5, delay: 10s, backoff: 1, jitter: true}
`, nil)
	require.NoError(t, err)
	sleeps := h.clock.Sleeps()
	require.Len(t, sleeps, 4, "a delay before each of the four retries")
	full := 0
	for _, d := range sleeps {
		assert.GreaterOrEqual(t, d, 5*time.Second)
		assert.LessOrEqual(t, d, 10*time.Second)
		if d == 10*time.Second {
			full++
		}
	}
	assert.Less(t, full, len(sleeps), "jitter shortens the delays")
}

func TestRetryLeavesNonRetryableErrorsAlone(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: noretry
steps:
  - id: bad
    uses: test.flaky
    with: {key: invalid, fails: 5, code: invalid}
    retry: {attempts: 5, delay: 1s}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Equal(t, 1, testProbe.count("invalid"), "invalid is not retried by default")
	assert.Empty(t, h.clock.Sleeps())
	assert.Equal(t, "invalid", h.steps(r.ID)["bad"].Error.Code)
}

func TestRetryIfOverridesTheDefaultPolicy(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: retryif
steps:
  - id: bad
    uses: test.flaky
    with: {key: retryif, fails: 2, code: failed}
    retry: {attempts: 3, delay: 1s, if: "${{ error.code == 'failed' && error.attempt < 3 }}"}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 3, testProbe.count("retryif"))
}

func TestStepTimeoutFailsTheStepWithTimeoutCode(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: timeout
steps:
  - id: slow
    uses: test.block
    timeout: 50ms
    with: {key: slow, until_cancelled: true}
  - id: never
    uses: log
    with: {message: unreachable}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepFailed, recs["slow"].Status)
	assert.Equal(t, "timeout", recs["slow"].Error.Code)
	assert.Contains(t, recs["slow"].Error.Message, "timed out after 50ms")
	assert.Equal(t, state.StepSkipped, recs["never"].Status)
}

func TestRunTimeoutFailsTheRunAndStillRunsFinally(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: runtimeout
timeout: 60ms
steps:
  - {id: slow, uses: test.block, with: {key: slow, until_cancelled: true}}
finally:
  - {id: cleanup, uses: log, with: {message: "status ${{ run.status }}"}}
`, nil)
	require.Error(t, err)
	assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Equal(t, state.StepSucceeded, h.steps(r.ID)["cleanup"].Status)
}

func TestContinueOnErrorKeepsTheRunGoing(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: continue
steps:
  - id: optional
    uses: fail
    continue_on_error: true
    with: {message: "not fatal"}
  - id: next
    uses: set
    with: {saw: "${{ steps.optional.status }}: ${{ steps.optional.error.message }}"}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, "failed: not fatal", h.steps(r.ID)["next"].Outputs["saw"])
}

func TestOnFailureAndFinallyRunAfterAFailure(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: handlers
steps:
  - {id: boom, uses: fail, with: {message: "boom happened"}}
  - {id: skipped, uses: log, with: {message: never}}
  - {id: always, uses: log, if: "${{ always() }}", with: {message: always runs}}
on_failure:
  - {id: alert, uses: set, with: {why: "${{ steps.boom.error.message }}"}}
finally:
  - {id: report, uses: set, with: {status: "${{ run.status }}"}}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepSkipped, recs["skipped"].Status)
	assert.Equal(t, state.StepSucceeded, recs["always"].Status)
	assert.Equal(t, "boom happened", recs["alert"].Outputs["why"])
	assert.Equal(t, "failed", recs["report"].Outputs["status"])
	assert.Contains(t, r.Error.Message, "boom happened")
}

func TestOnFailureDoesNotRunAfterSuccess(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: handlers-ok
steps:
  - {id: fine, uses: log, with: {message: ok}}
on_failure:
  - {id: alert, uses: log, with: {message: alert}}
finally:
  - {id: report, uses: set, with: {status: "${{ run.status }}"}}
`, nil)
	require.NoError(t, err)
	recs := h.steps(r.ID)
	assert.Nil(t, recs["alert"])
	assert.Equal(t, "succeeded", recs["report"].Outputs["status"])
}

func TestCancellationIsPersistedAndStopsTheRun(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: cancel
steps:
  - {id: wait, uses: test.block, with: {key: cancel, until_cancelled: true}}
  - {id: after, uses: log, with: {message: never}}
finally:
  - {id: cleanup, uses: log, with: {message: "cleaning after ${{ run.status }}"}}
`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for testProbe.count("cancel") == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	r, err := h.engine.Run(ctx, pb, engine.StartRequest{})
	require.Error(t, err)
	assert.Equal(t, fault.Cancelled, fault.CodeOf(err))
	got, err := h.store.GetRun(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status)
	recs := h.steps(r.ID)
	assert.Equal(t, state.StepCancelled, recs["wait"].Status)
	assert.Nil(t, recs["after"], "a step not started is left for a resume")
	assert.Equal(t, state.StepSucceeded, recs["cleanup"].Status, "finally runs after a cancellation")

	// Resuming runs the cancelled step and the rest; finally runs again at the real end.
	before := len(h.eventOrder("step.succeeded"))
	go func() {
		for testProbe.count("cancel") < 2 {
			time.Sleep(time.Millisecond)
		}
		h.engine.Cancel(r.ID, nil)
	}()
	r, err = h.engine.Resume(context.Background(), r.ID)
	require.Error(t, err)
	assert.Equal(t, 2, testProbe.count("cancel"), "the cancelled step ran again")
	assert.Equal(t, state.RunCancelled, r.Status)
	assert.Equal(t, []string{"step.succeeded cleanup"}, h.eventOrder("step.succeeded")[before:])
}

func TestResumeSkipsFinishedStepsAndReconcilesMutations(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	pb := h.load(`
version: 1
name: resume
inputs:
  hang: {type: boolean, default: true}
steps:
  - {id: first, uses: test.flaky, with: {key: first}}
  - {id: create, uses: test.create, with: {name: cluster-a, hang: "${{ inputs.hang }}"}}
  - {id: last, uses: set, with: {adopted: "${{ steps.create.outputs.adopted }}"}}
`)
	// The first process "dies" while the create call hangs after creating.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			testProbe.mu.Lock()
			n := testProbe.creates["cluster-a"]
			testProbe.mu.Unlock()
			if n > 0 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	r, err := h.engine.Run(ctx, pb, engine.StartRequest{})
	require.Error(t, err)
	require.Equal(t, state.RunCancelled, r.Status)

	r, err = h.engine.Resume(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, 1, testProbe.count("first"), "a finished step is not run again")
	testProbe.mu.Lock()
	assert.Equal(t, 1, testProbe.creates["cluster-a"], "the resource is created once")
	testProbe.mu.Unlock()
	assert.Equal(t, true, h.steps(r.ID)["last"].Outputs["adopted"])
	assert.Contains(t, h.eventOrder("step.reconciled"), "step.reconciled create")
}

func TestApprovalParksTheRunUntilAnswered(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: approve
steps:
  - id: gate
    uses: approval
    with:
      message: "upgrade prod?"
      fields: {ticket: {type: string, required: true}}
  - id: after
    uses: set
    with: {ticket: "${{ steps.gate.outputs.fields.ticket }}", by: "${{ steps.gate.outputs.by }}"}
`, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	assert.Equal(t, state.StepWaiting, h.steps(r.ID)["gate"].Status)

	require.NoError(t, h.engine.Approve(context.Background(), r.ID, "gate", state.Approval{
		Approved: true, By: "alice", Fields: map[string]any{"ticket": "OPS-1"},
	}))
	r, err = h.engine.Resume(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	out := h.steps(r.ID)["after"].Outputs
	assert.Equal(t, "OPS-1", out["ticket"])
	assert.Equal(t, "alice", out["by"])
}

func TestApprovalRejectionFailsTheRun(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: reject
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
`, nil)
	require.NoError(t, err)
	require.NoError(t, h.engine.Approve(context.Background(), r.ID, "gate", state.Approval{Approved: false, By: "bob", Comment: "not today"}))
	r, err = h.engine.Resume(context.Background(), r.ID)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	assert.Contains(t, r.Error.Message, "not today")
}

func TestSubPlaybookOutputsReachTheParent(t *testing.T) {
	h := newHarness(t)
	h.write("child.yaml", `
version: 1
name: child
inputs:
  who: {type: string, required: true}
steps:
  - {id: greet, uses: set, with: {text: "hi ${{ inputs.who }}"}}
outputs:
  text: ${{ steps.greet.outputs.text }}
`)
	r, err := h.run(`
version: 1
name: parent
steps:
  - {id: sub, uses: playbook, with: {path: child.yaml, inputs: {who: ops}}}
  - {id: use, uses: set, with: {got: "${{ steps.sub.outputs.text }}"}}
`, nil)
	require.NoError(t, err)
	assert.Equal(t, "hi ops", h.steps(r.ID)["use"].Outputs["got"])
	child, err := h.store.GetRun(context.Background(), r.ID+".sub")
	require.NoError(t, err)
	assert.Equal(t, r.ID, child.ParentID)
	assert.Equal(t, state.RunSucceeded, child.Status)
}

func TestConcurrencyKeySkipWhenBusy(t *testing.T) {
	h := newHarness(t)
	src := `
version: 1
name: locked
inputs:
  cluster: {type: string, default: prod}
concurrency: {key: "nks/${{ inputs.cluster }}", on_busy: skip}
steps:
  - {id: a, uses: log, with: {message: hi}}
`
	ok, _, err := h.store.AcquireLock(context.Background(), state.Lock{Key: "nks/prod", Owner: "someone-else"})
	require.NoError(t, err)
	require.True(t, ok)
	r, err := h.run(src, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSkipped, r.Status)
	assert.Contains(t, r.Error.Message, "nks/prod")

	require.NoError(t, h.engine.ReleaseStaleLocks(context.Background()))
	r, err = h.run(src, nil)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	locks, err := h.store.Locks(context.Background())
	require.NoError(t, err)
	assert.Empty(t, locks, "the run releases its key")
}

func TestInputsAreCheckedBeforeTheRunExists(t *testing.T) {
	h := newHarness(t)
	pb := h.load(`
version: 1
name: inputs
inputs:
  count: {type: integer, min: 1, max: 10, required: true}
  mode: {type: string, enum: [fast, safe], default: safe}
steps:
  - {id: a, uses: log, with: {message: "${{ inputs.count }}"}}
`)
	_, err := h.engine.Run(context.Background(), pb, engine.StartRequest{Inputs: map[string]any{"count": "11", "mode": "yolo", "extra": "x"}})
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	for _, want := range []string{`"count": must be between 1 and 10 (got 11)`, `"mode": must be one of "fast", "safe"`, `unknown input "extra"`} {
		assert.Contains(t, err.Error(), want)
	}
	runs, err := h.store.ListRuns(context.Background(), state.RunFilter{})
	require.NoError(t, err)
	assert.Empty(t, runs)
}

func TestSecretsNeverReachTheStateFile(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: secret
steps:
  - id: leak
    uses: set
    with:
      raw: ${{ secrets.TOKEN }}
      wrapped: "Bearer ${{ secrets.TOKEN }}!"
  - id: log
    uses: log
    with: {message: "token is ${{ secrets.TOKEN }}"}
  - id: shout
    uses: fail
    with: {message: "failed with ${{ secrets.TOKEN }}"}
`, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t-t0ken-value")
	assert.Equal(t, "Bearer ***!", h.steps(r.ID)["leak"].Outputs["wrapped"])
	require.NoError(t, h.store.Close())
	raw, err := os.ReadFile(filepath.Join(h.dir, "state.db"))
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(raw), "s3cr3t-t0ken-value"), "the secret is in the state file")
	for _, ev := range h.events {
		assert.NotContains(t, ev.Message, "s3cr3t-t0ken-value")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestConnectionSettingsEvaluateExpressionsAtRunTime(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: conn
inputs:
  region: {type: string, default: kr2}
connections:
  svc: {base_url: "https://api.${{ inputs.region }}.example.com", key: "${{ secrets.TOKEN }}", retries: 3}
steps:
  - {id: use, uses: test.conn}
`, nil)
	require.NoError(t, err)
	testProbe.mu.Lock()
	got := testProbe.conn
	testProbe.mu.Unlock()
	assert.Equal(t, "https://api.kr2.example.com", got["base_url"])
	assert.Equal(t, "s3cr3t-t0ken-value", got["key"], "the step gets the real secret")
	assert.Equal(t, 3, got["retries"])
	out := h.steps(r.ID)["use"].Outputs["conn"].(map[string]any)
	assert.Equal(t, "***", out["key"], "but it is masked in the state")
}

func TestSecretOutputsAreMaskedEverywhereTheyAreWritten(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: cred
steps:
  - {id: get, uses: test.credential}
  - {id: echo, uses: set, with: {copy: "${{ steps.get.outputs.token }}"}}
`, nil)
	require.NoError(t, err)
	recs := h.steps(r.ID)
	assert.Equal(t, "***", recs["get"].Outputs["token"])
	assert.Equal(t, "issued ***", recs["get"].Outputs["note"], "copies inside other outputs are masked too")
	assert.Equal(t, "***", recs["echo"].Outputs["copy"], "later steps see the mask")
	require.NoError(t, h.store.Close())
	raw, err := os.ReadFile(filepath.Join(h.dir, "state.db"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "kube-cred-5f0e1d2c")
}
