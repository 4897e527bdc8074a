package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
)

// A mutating call that failed is retried. A refusal proves the call had no
// effect, so the retry calls again; an ambiguous failure may hide a call
// that went through, so the retry looks the resource up first and adopts
// it rather than create a second one.
func TestARetriedMutationLooksUpOnlyWhatMayExist(t *testing.T) {
	cases := []struct {
		name        string
		key         string
		with        string
		retry       string
		wantCalls   int
		wantLookups int
		wantCreated int
		wantAdopted bool
	}{
		{
			name:      "a throttled call was refused: the retry calls again without a lookup",
			key:       "refused",
			with:      "{key: refused, fails: 1, code: throttled}",
			retry:     "{attempts: 3, delay: 1s}",
			wantCalls: 2, wantLookups: 0, wantCreated: 1, wantAdopted: false,
		},
		{
			name:      "a conflict was refused: the retry calls again without a lookup",
			key:       "conflict",
			with:      "{key: conflict, fails: 2, code: conflict}",
			retry:     `{attempts: 3, delay: 1s, if: "${{ error.code == 'conflict' }}"}`,
			wantCalls: 3, wantLookups: 0, wantCreated: 1, wantAdopted: false,
		},
		{
			name:      "an unavailable answer is ambiguous: the retry adopts what the call created",
			key:       "lost",
			with:      "{key: lost, fails: 1, code: unavailable, lost: true}",
			retry:     "{attempts: 3, delay: 1s}",
			wantCalls: 1, wantLookups: 1, wantCreated: 1, wantAdopted: true,
		},
		{
			name:      "an ambiguous failure that created nothing: the lookup finds nothing and the call is made again",
			key:       "nothing",
			with:      "{key: nothing, fails: 1, code: unavailable}",
			retry:     "{attempts: 3, delay: 1s}",
			wantCalls: 2, wantLookups: 1, wantCreated: 1, wantAdopted: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			r, err := h.run(`
version: 1
name: refuse
steps:
  - id: create
    uses: test.refuse
    with: `+tc.with+`
    retry: `+tc.retry+`
`, nil)
			require.NoError(t, err)
			assert.Equal(t, state.RunSucceeded, r.Status)
			key := tc.key
			assert.Equal(t, tc.wantCalls, testProbe.count(key), "calls made")
			assert.Equal(t, tc.wantLookups, testProbe.count("lookup "+key), "lookups made")
			testProbe.mu.Lock()
			assert.Equal(t, tc.wantCreated, testProbe.creates[key], "resources created")
			testProbe.mu.Unlock()
			assert.Equal(t, tc.wantAdopted, h.steps(r.ID)["create"].Outputs["adopted"])
			assert.Equal(t, tc.wantAdopted, len(h.stored(r.ID, "step.reconciled")) == 1)
		})
	}
}

// What a step logs becomes events with its structured attributes: groups
// and attributes bound with With are flattened to dotted keys.
func TestStepLogLinesKeepTheirAttributes(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: logs
steps:
  - {id: fields, uses: log, with: {message: "resized", level: warn, fields: {nodes: 3, group: default-worker}}}
  - {id: lib, uses: test.logger}
`, nil)
	require.NoError(t, err)
	logs := map[string]state.Event{}
	for _, ev := range h.stored(r.ID, "log") {
		logs[ev.Message] = ev
	}
	cases := []struct {
		message string
		level   string
		data    map[string]any
	}{
		{"resized", "WARN", map[string]any{"nodes": float64(3), "group": "default-worker"}},
		{"plain", "INFO", nil},
		{"with attrs", "INFO", map[string]any{"cluster": "c1", "n": float64(1)}},
		{"grouped", "INFO", map[string]any{"req.method": "POST"}},
		{"nested", "INFO", map[string]any{"req.id": "r1", "req.retry.attempt": float64(2)}},
		{"group attr", "INFO", map[string]any{"resp.status": float64(200), "resp.hdr.etag": "x"}},
		{"values", "INFO", map[string]any{"took": "1.5s", "at": "2026-11-22T03:00:00Z", "err": "boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.message, func(t *testing.T) {
			ev, ok := logs[tc.message]
			require.True(t, ok, "the line is in the run's events")
			assert.Equal(t, tc.level, ev.Level)
			assert.Equal(t, tc.data, ev.Data)
		})
	}
}

// Events of a step carry the engine's clock, as the run's own events do
// (the simulator and tests run on a clock of their own).
func TestStepEventsAreStampedWithTheEngineClock(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(`
version: 1
name: stamps
steps:
  - {id: a, uses: set, with: {x: 1}}
  - {id: b, uses: test.flaky, with: {key: stamps}}
`, nil)
	require.NoError(t, err)
	want := h.clock.Now()
	for _, typ := range []string{"step.started", "step.succeeded"} {
		evs := h.stored(r.ID, typ)
		require.Len(t, evs, 2, typ)
		for _, ev := range evs {
			assert.True(t, ev.Time.Equal(want), "%s %s at %s, want %s", ev.Type, ev.Step, ev.Time, want)
		}
	}
}

// A long step's events reach the state file while the step still runs, at
// most 63 behind: `runbook runs logs` in another process shows them.
func TestALongStepsLogIsPersistedWhileItRuns(t *testing.T) {
	for _, lines := range []int{63, 100} {
		t.Run(itoa(lines)+" lines", func(t *testing.T) {
			testProbe.reset()
			h := newHarness(t)
			pb := h.load(`
version: 1
name: chatty
steps:
  - {id: talk, uses: test.chatty, with: {key: talk, lines: ` + itoa(lines) + `}}
`)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = h.engine.Run(ctx, pb, engine.StartRequest{ID: "chatty"})
			}()
			require.Eventually(t, func() bool { return testProbe.count("talk") == 1 }, 5*time.Second, time.Millisecond)
			visible := 0
			for _, ev := range h.stored("chatty", "") {
				if ev.Step == "talk" {
					visible++
				}
			}
			cancel()
			<-done
			emitted := 1 + lines // step.started, then the lines
			assert.GreaterOrEqual(t, visible, emitted-63, "events of the step in the state file while it runs")
			assert.Len(t, h.stored("chatty", "log"), lines, "every line once the step ended")
		})
	}
}

// A parked run resumed without an answer asks again: its log shows the
// request (and how to answer it) once per process that waits for it.
func TestAResumedUnansweredApprovalIsRequestedAgain(t *testing.T) {
	h := newHarness(t)
	r, err := h.run(gatePlaybook, nil)
	require.NoError(t, err)
	require.Equal(t, state.RunWaiting, r.Status)
	require.Len(t, h.stored(r.ID, "approval.requested"), 1)

	r, err = h.engine.Resume(context.Background(), r.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, r.Status)
	reqs := h.stored(r.ID, "approval.requested")
	require.Len(t, reqs, 2, "the resumed run asked again")
	assert.Contains(t, reqs[1].Message, "runbook runs approve "+r.ID+" gate")
	assert.Len(t, h.stored(r.ID, "step.started"), 1, "the resume continued the same attempt")
	assert.Equal(t, 1, h.steps(r.ID)["gate"].Attempts)
}

// saveStepsFails is the real store with SaveSteps failing, as a full disk
// would make it.
type saveStepsFails struct{ state.Store }

func (saveStepsFails) SaveSteps(context.Context, []*state.StepRecord, ...state.Event) error {
	return errors.New("disk full")
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A step record the store refuses for good (a full disk) is reported in
// the engine's log (with the run) and stops the run: nothing after the
// step runs, and the run is recorded failed with an error naming the
// cause, never succeeded with its records missing. A run whose writes
// succeed logs nothing.
func TestAStepRecordTheStoreRefusesFailsTheRun(t *testing.T) {
	cases := []struct {
		name    string
		failing bool
		want    []string
	}{
		{name: "writes succeed: nothing is logged", failing: false},
		{name: "a refused write is logged with the run and fails it", failing: true, want: []string{"level=ERROR", "save steps", "run_id=logged", "disk full"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			h := newHarness(t, func(o *engine.Options) {
				o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
				if tc.failing {
					o.Store = saveStepsFails{o.Store}
				}
			})
			marker := filepath.Join(t.TempDir(), "b")
			pb := h.load(`
version: 1
name: logged
steps:
  - {id: a, uses: test.flaky, with: {key: logged}}
  - {id: b, uses: shell, with: {command: "echo b >> ` + marker + `"}}
`)
			r, err := h.engine.Run(context.Background(), pb, engine.StartRequest{ID: "logged"})
			stored, gerr := h.store.GetRun(context.Background(), "logged")
			require.NoError(t, gerr)
			if !tc.failing {
				require.NoError(t, err)
				assert.Equal(t, state.RunSucceeded, r.Status)
				assert.Equal(t, state.RunSucceeded, stored.Status)
				assert.Empty(t, buf.String())
				return
			}
			require.ErrorIs(t, err, engine.ErrNotWritten)
			assert.Contains(t, err.Error(), "disk full")
			assert.Equal(t, state.RunFailed, r.Status)
			assert.Equal(t, state.RunFailed, stored.Status, "recorded failed")
			require.NotNil(t, stored.Error)
			assert.Contains(t, stored.Error.Message, "the run's state could not be written")
			assert.Contains(t, stored.Error.Message, "disk full")
			assert.NoFileExists(t, marker, "nothing runs after the unwritten step")
			for _, w := range tc.want {
				assert.Contains(t, buf.String(), w)
			}
		})
	}
}
