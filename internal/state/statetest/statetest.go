package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Run runs the contract suite against stores from open, one fresh and
// empty store per test. Deduplication expiry is checked on the real clock
// (a 50ms ttl and one short sleep); prefer RunClocked when the store takes
// a clock.
func Run(t *testing.T, open func(t *testing.T) state.Store) {
	t.Helper()
	run(t, func(t *testing.T) (state.Store, *Clock) { return open(t), nil })
}

// RunClocked runs the contract suite against stores from open, passing each
// a clock the suite controls, so expiry is checked without sleeping. The
// store must use now for deduplication.
func RunClocked(t *testing.T, open func(t *testing.T, now func() time.Time) state.Store) {
	t.Helper()
	run(t, func(t *testing.T) (state.Store, *Clock) {
		c := NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
		return open(t, c.Now), c
	})
}

// opener returns a fresh store and, when the suite controls it, its clock.
type opener func(t *testing.T) (state.Store, *Clock)

func run(t *testing.T, open opener) {
	groups := []struct {
		name string
		fn   func(t *testing.T, open opener)
	}{
		{"runs", testRuns},
		{"deleting runs", testDeleteRuns},
		{"listing runs", testListRuns},
		{"paging runs", testListPaging},
		{"recent runs of each playbook", testRecentRuns},
		{"steps", testSteps},
		{"events", testEvents},
		{"intents and approvals", testRecords},
		{"approval answers", testAnswers},
		{"locks", testLocks},
		{"cursors", testCursors},
		{"dedup", testDedup},
		{"dedup values", testDedupValues},
		{"deliveries", testDeliveries},
		{"delivery bodies", testDeliveryBodies},
		{"unused delivery bodies", testUnusedDeliveries},
		{"a run saved with its steps", testRunSteps},
		{"wake times", testWakeTimes},
		{"fenced writes", testFence},
		{"cancelled contexts", testCancelled},
		{"concurrent writers", testConcurrent},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.fn(t, open) })
	}
}

// Clock is a manual clock for RunClocked. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var ctx = context.Background()

// base is the time test records are created around: UTC, so values that
// round-trip through an encoding compare equal.
var base = time.Date(2029, 6, 1, 12, 0, 0, 123456789, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func errIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want one wrapping %q", err, target)
	}
}

// same reports a difference between got and want, showing both as JSON.
func same(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}

func newRun(id, playbook string, created time.Time) *state.Run {
	return &state.Run{ID: id, Playbook: playbook, Hash: "h-" + id, Status: state.RunPending, CreatedAt: created}
}

func create(t *testing.T, s state.Store, r *state.Run, events ...state.Event) {
	t.Helper()
	ok(t, s.CreateRun(ctx, r, events...))
}

func seqs(events []state.Event) []uint64 {
	out := []uint64{}
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func runIDs(runs []*state.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func stepIDs(steps []*state.StepRecord) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, s.ID)
	}
	return out
}
