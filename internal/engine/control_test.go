package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// A run cancelled with a reason records it; without one it says only that
// it was cancelled.
func TestACancelledRunRecordsWhy(t *testing.T) {
	cases := []struct {
		name  string
		cause error
		want  string
	}{
		{name: "with a reason", cause: errors.New("maintenance window closed"), want: "run cancelled: maintenance window closed"},
		{name: "without a reason", cause: nil, want: "run cancelled: cancelled"},
		{name: "with a reason that says it already", cause: errors.New("run cancelled by cancel_running"), want: "run cancelled by cancel_running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			pb := h.load(`
version: 1
name: cancel-why
steps:
  - {id: wait, uses: test.block, with: {key: why, until_cancelled: true}}
`)
			go func() {
				for testProbe.count("why") == 0 {
					time.Sleep(time.Millisecond)
				}
				h.engine.Cancel("cancel-why", tc.cause)
			}()
			r, err := h.engine.Run(context.Background(), pb, engine.StartRequest{ID: "cancel-why"})
			require.Error(t, err)
			assert.Equal(t, fault.Cancelled, fault.CodeOf(err))
			assert.Equal(t, tc.want, err.Error())
			got, err := h.store.GetRun(context.Background(), r.ID)
			require.NoError(t, err)
			assert.Equal(t, state.RunCancelled, got.Status)
			assert.Equal(t, tc.want, got.Error.Message)
		})
	}
}

// Approve answers a step that waits (or was running when its process
// stopped) and refuses any other.
func TestApproveAnswersOnlyAStepThatMayWait(t *testing.T) {
	cases := []struct {
		name     string
		status   state.StepStatus
		wantCode fault.Code // "" when accepted
	}{
		{name: "a waiting step", status: state.StepWaiting},
		{name: "a step recorded as running", status: state.StepRunning},
		{name: "a succeeded step", status: state.StepSucceeded, wantCode: fault.Conflict},
		{name: "a failed step", status: state.StepFailed, wantCode: fault.Conflict},
		{name: "a skipped step", status: state.StepSkipped, wantCode: fault.Conflict},
		{name: "a step that never ran", wantCode: fault.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			r, err := h.engine.Start(ctx, h.load(gatePlaybook), engine.StartRequest{})
			require.NoError(t, err)
			if tc.status != "" {
				require.NoError(t, h.store.SaveSteps(ctx, []*state.StepRecord{{RunID: r.ID, ID: "gate", Status: tc.status, Attempts: 1}}))
			}
			err = h.engine.Approve(ctx, r.ID, "gate", state.Approval{Approved: true, By: "erin"})
			_, answerErr := h.store.GetApproval(ctx, r.ID, "gate")
			if tc.wantCode == "" {
				require.NoError(t, err)
				assert.NoError(t, answerErr, "the answer is recorded")
				assert.Len(t, h.stored(r.ID, "approval.answered"), 1)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.wantCode, fault.CodeOf(err))
			assert.ErrorIs(t, answerErr, state.ErrNotFound, "no answer is recorded")
		})
	}
}

// cancelAfter is the fake clock that cancels the run after too many
// sleeps, so a run that waits in a loop without time passing ends.
type cancelAfter struct {
	*fakeClock
	max    int
	cancel context.CancelFunc
}

func (c *cancelAfter) Sleep(ctx context.Context, d time.Duration) error {
	if len(c.Sleeps()) >= c.max {
		c.cancel()
	}
	return c.fakeClock.Sleep(ctx, d)
}

// on_failure may hold more steps than the main list; each runs.
func TestEveryOnFailureStepRuns(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: handlers-many
steps:
  - {id: boom, uses: fail, with: {message: boom}}
on_failure:
  - {id: alert, uses: log, with: {message: alert}}
  - {id: page, uses: log, with: {message: page}}
  - {id: ticket, uses: set, with: {why: "${{ steps.boom.error.message }}"}}
`, nil)
	require.Error(t, err)
	assert.Equal(t, state.RunFailed, r.Status)
	recs := h.steps(r.ID)
	for _, id := range []string{"alert", "page", "ticket"} {
		require.NotNil(t, recs[id], id)
		assert.Equal(t, state.StepSucceeded, recs[id].Status, id)
	}
	assert.Equal(t, "boom", recs["ticket"].Outputs["why"])
}

// ReleaseStaleLocks frees every key held by a run that no longer executes
// here (a process that stopped), and only those.
func TestReleaseStaleLocksFreesTheKeysOfRunsThatStopped(t *testing.T) {
	testProbe.reset()
	h := newHarness(t)
	ctx := context.Background()
	for _, l := range []state.Lock{{Key: "nks/a", Owner: "gone-1"}, {Key: "nks/b", Owner: "gone-2"}} {
		ok, _, err := h.store.AcquireLock(ctx, l)
		require.NoError(t, err)
		require.True(t, ok)
	}
	pb := h.load(`
version: 1
name: live
concurrency: {key: nks/live}
steps:
  - {id: wait, uses: test.block, with: {key: live, until_cancelled: true}}
`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.engine.Run(ctx, pb, engine.StartRequest{ID: "live"})
	}()
	require.Eventually(t, func() bool { return testProbe.count("live") == 1 }, 5*time.Second, time.Millisecond)

	require.NoError(t, h.engine.ReleaseStaleLocks(ctx))
	locks, err := h.store.Locks(ctx)
	require.NoError(t, err)
	var held []string
	for _, l := range locks {
		held = append(held, l.Key+" "+l.Owner)
	}
	assert.Equal(t, []string{"nks/live live"}, held, "only the executing run keeps its key")
	h.engine.Cancel("live", nil)
	<-done
}

// A step's error keeps its details: later steps read them as
// steps.<id>.error.data and the step's record holds them.
func TestAStepErrorKeepsItsData(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: error-data
steps:
  - {id: check, uses: fail, continue_on_error: true, with: {message: "quota exceeded", code: conflict, data: {quota: 10, used: 12}}}
  - {id: report, uses: set, with: {used: "${{ steps.check.error.data.used }}", code: "${{ steps.check.error.code }}"}}
`, nil)
	require.NoError(t, err)
	recs := h.steps(r.ID)
	require.NotNil(t, recs["check"].Error)
	assert.Equal(t, map[string]any{"quota": float64(10), "used": float64(12)}, recs["check"].Error.Data)
	assert.EqualValues(t, 12, recs["report"].Outputs["used"])
	assert.Equal(t, "conflict", recs["report"].Outputs["code"])
}

// saveRunFails is the real store refusing to write a run record in one
// status, as a full disk would at that moment.
type saveRunFails struct {
	state.Store
	status state.RunStatus
}

func (s saveRunFails) SaveRun(ctx context.Context, r *state.Run, evs ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, evs...)
}

func (s saveRunFails) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, evs ...state.Event) error {
	if r.Status == s.status {
		return errors.New("disk full")
	}
	return s.Store.SaveRunSteps(ctx, r, recs, evs...)
}

// A run whose last record cannot be written says so to its caller rather
// than report an outcome the state file does not hold.
func TestARunRecordThatCannotBeWrittenIsAnError(t *testing.T) {
	cases := []struct {
		name   string
		status state.RunStatus
		src    string
		setup  func(t *testing.T, h *harness)
	}{
		{
			name:   "a skipped run",
			status: state.RunSkipped,
			src: `
version: 1
name: unsaved
concurrency: {key: busy, on_busy: skip}
steps:
  - {id: a, uses: log, with: {message: hi}}
`,
			setup: func(t *testing.T, h *harness) {
				ok, _, err := h.store.AcquireLock(context.Background(), state.Lock{Key: "busy", Owner: "someone-else"})
				require.NoError(t, err)
				require.True(t, ok)
			},
		},
		{name: "a parked run", status: state.RunWaiting, src: gatePlaybook},
		{
			name:   "a finished run",
			status: state.RunSucceeded,
			src: `
version: 1
name: unsaved
steps:
  - {id: a, uses: log, with: {message: hi}}
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *engine.Options) { o.Store = saveRunFails{Store: o.Store, status: tc.status} })
			if tc.setup != nil {
				tc.setup(t, h)
			}
			r, err := h.run(tc.src, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "disk full")
			require.NotNil(t, r)
			assert.Equal(t, tc.status, r.Status)
		})
	}
}
