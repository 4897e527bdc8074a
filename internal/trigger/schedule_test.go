package trigger

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/all" // the log step of the test playbooks
)

// fakeClock is a Clock the test advances. The scheduler calls After once
// per loop iteration and never reads an older channel again, so the clock
// keeps one waiter; the scheduler is idle once it registered a waiter.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	ch    chan time.Time // the waiter; nil: none
	at    time.Time      // when it fires
	calls int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		c.ch = nil
		return ch
	}
	c.ch, c.at = ch, c.now.Add(d)
	return ch
}

// idleAfter waits until the scheduler made more than n After calls and
// sleeps on a waiter.
func (c *fakeClock) idleAfter(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		ok := c.calls > n && c.ch != nil
		c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("scheduler did not go back to sleep")
}

// wakeAt sets the clock to at and wakes the scheduler, then waits until it
// sleeps again.
func (c *fakeClock) wakeAt(t *testing.T, at time.Time) {
	t.Helper()
	c.mu.Lock()
	c.now = at
	n, ch := c.calls, c.ch
	c.ch = nil
	c.mu.Unlock()
	if ch != nil {
		ch <- at
		c.idleAfter(t, n)
	}
}

// runUntil moves the clock forward to until, stopping at every time the
// scheduler asked to be woken, as a real clock would.
func (c *fakeClock) runUntil(t *testing.T, until time.Time) {
	t.Helper()
	for {
		c.mu.Lock()
		if c.ch == nil || c.at.After(until) {
			c.now = until
			c.mu.Unlock()
			return
		}
		at := c.at
		c.mu.Unlock()
		c.wakeAt(t, at)
	}
}

// fakeStarter records starts; with hold, started runs stay active until
// finish.
type fakeStarter struct {
	mu        sync.Mutex
	clock     *fakeClock
	hold      bool
	starts    []StartRequest
	at        []time.Time
	active    map[string][]string
	cancelled []string
	// advance moves the clock forward during each Start (a slow commit).
	advance time.Duration
}

func (f *fakeStarter) Start(_ context.Context, req StartRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, req)
	f.at = append(f.at, f.clock.Now())
	if f.advance > 0 {
		f.clock.mu.Lock()
		f.clock.now = f.clock.now.Add(f.advance)
		f.clock.mu.Unlock()
	}
	id := fmt.Sprintf("run-%d", len(f.starts))
	if f.hold {
		if f.active == nil {
			f.active = map[string][]string{}
		}
		f.active[req.Playbook.Name] = append(f.active[req.Playbook.Name], id)
	}
	return id, nil
}

func (f *fakeStarter) Active(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.active[name]...)
}

func (f *fakeStarter) Cancel(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, id)
	for name, ids := range f.active {
		for i, x := range ids {
			if x == id {
				f.active[name] = append(ids[:i:i], ids[i+1:]...)
			}
		}
	}
}

func (f *fakeStarter) finish(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, name)
}

// slots lists the trigger.slot of every start, in order.
func (f *fakeStarter) slots() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []string{}
	for _, r := range f.starts {
		out = append(out, r.Trigger["slot"].(string))
	}
	return out
}

// rig is a scheduler over a real bbolt file, a fake clock and starter.
type rig struct {
	t       *testing.T
	path    string
	store   *bolt.Store
	clock   *fakeClock
	starter *fakeStarter
	sched   *Scheduler
	stop    func()
}

func newRig(t *testing.T, now time.Time) *rig {
	t.Helper()
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "state.db"), clock: &fakeClock{now: now}}
	r.starter = &fakeStarter{clock: r.clock}
	t.Cleanup(func() { r.shutdown() })
	return r
}

// start opens the store and runs a new scheduler over pbs.
func (r *rig) start(opts SchedulerOptions, pbs ...*playbook.Playbook) {
	r.t.Helper()
	st, err := bolt.Open(r.path, bolt.Options{})
	require.NoError(r.t, err)
	r.store = st
	opts.Store, opts.Starter, opts.Clock = st, r.starter, r.clock
	if opts.MaxSleep == 0 {
		opts.MaxSleep = time.Hour // fewer idle wake-ups over simulated days
	}
	r.sched = NewScheduler(opts)
	r.sched.Set(pbs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r.clock.mu.Lock()
	n := r.clock.calls
	r.clock.mu.Unlock()
	go func() { done <- r.sched.Run(ctx) }()
	r.clock.idleAfter(r.t, n)
	r.stop = func() {
		cancel()
		assert.ErrorIs(r.t, <-done, context.Canceled)
	}
}

// shutdown stops the scheduler and closes the store, as a process exit.
func (r *rig) shutdown() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
		require.NoError(r.t, r.store.Close())
	}
	r.clock.mu.Lock()
	r.clock.ch = nil
	r.clock.mu.Unlock()
}

// set calls Set and waits until the scheduler applied it.
func (r *rig) set(pbs ...*playbook.Playbook) {
	r.t.Helper()
	r.clock.mu.Lock()
	n := r.clock.calls
	r.clock.mu.Unlock()
	r.sched.Set(pbs)
	r.clock.idleAfter(r.t, n)
}

// book parses a playbook with one schedule trigger whose YAML flow map is
// schedule; the trigger passes trigger.slot as the input `slot`.
func book(t *testing.T, name, schedule string) *playbook.Playbook {
	t.Helper()
	src := fmt.Sprintf(`version: 1
name: %s
inputs:
  slot: {type: string, default: ""}
triggers:
  - schedule: %s
    inputs: {slot: "${{ trigger.slot }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`, name, schedule)
	pb, err := playbook.Parse(name+".yaml", []byte(src), playbook.LoadOptions{})
	require.NoError(t, err)
	return pb
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestScheduleFiresEachSlotInTheTriggersZone(t *testing.T) {
	r := newRig(t, utc("2026-11-21T12:00:00Z")) // 21:00 in Seoul
	var firings []Firing
	r.start(SchedulerOptions{OnFire: func(f Firing) { firings = append(firings, f) }},
		book(t, "daily", `{cron: "0 9 * * *", timezone: Asia/Seoul}`))
	r.clock.runUntil(t, utc("2026-11-24T12:00:00Z"))

	want := []string{"2026-11-22T09:00:00+09:00", "2026-11-23T09:00:00+09:00", "2026-11-24T09:00:00+09:00"}
	assert.Equal(t, want, r.starter.slots())
	req := r.starter.starts[0]
	assert.Equal(t, "daily", req.Playbook.Name)
	assert.Equal(t, map[string]any{"type": "schedule", "slot": want[0], "cron": "0 9 * * *", "late_ms": int64(0)}, req.Trigger)
	assert.Equal(t, map[string]any{"slot": want[0]}, req.Inputs, "trigger inputs are evaluated over trigger")
	assert.Equal(t, utc("2026-11-22T00:00:00Z"), r.starter.at[0])
	assert.Equal(t, Stats{Started: 3}, r.sched.Stats())
	require.Len(t, firings, 3)
	assert.Equal(t, Firing{Playbook: "daily", Trigger: 0, Slot: utc("2026-11-22T00:00:00Z").In(firings[0].Slot.Location()), Outcome: Started, RunID: "run-1"}, firings[0])
}

// robfig/cron computes slots in wall-clock time of the zone: on the
// spring-forward day a 02:30 slot does not exist and is skipped (no run
// that day, not 03:30); on the fall-back day the repeated hour's 01:30
// happens twice and fires twice (EDT, then EST). 02:30 is not affected by
// the fall back.
func TestScheduleAcrossDaylightSavingChanges(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	cases := []struct {
		name, cron string
		from, to   time.Time
		want       []string
	}{
		{"a 02:30 slot that does not exist on the spring-forward day is skipped", "30 2 * * *",
			time.Date(2026, 3, 6, 0, 0, 0, 0, ny), time.Date(2026, 3, 10, 12, 0, 0, 0, ny),
			[]string{"2026-03-06T02:30:00-05:00", "2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"a 01:30 slot in the repeated hour of the fall-back day fires twice", "30 1 * * *",
			time.Date(2026, 10, 31, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 12, 0, 0, 0, ny),
			[]string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"}},
		{"a 02:30 slot on the fall-back day fires once", "30 2 * * *",
			time.Date(2026, 10, 31, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 12, 0, 0, 0, ny),
			[]string{"2026-10-31T02:30:00-04:00", "2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.from)
			r.start(SchedulerOptions{}, book(t, "dst", fmt.Sprintf(`{cron: %q, timezone: America/New_York}`, tc.cron)))
			r.clock.runUntil(t, tc.to)
			assert.Equal(t, tc.want, r.starter.slots())
			for _, at := range r.starter.at {
				assert.Zero(t, at.Second(), "started on the slot")
			}
		})
	}
	t.Run("a CRON_TZ prefix sets the zone", func(t *testing.T) {
		r := newRig(t, utc("2026-03-07T00:00:00Z"))
		r.start(SchedulerOptions{}, book(t, "tz", `{cron: "CRON_TZ=America/New_York 30 2 * * *"}`))
		r.clock.runUntil(t, utc("2026-03-10T00:00:00Z"))
		assert.Equal(t, []string{"2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00"}, r.starter.slots())
	})
}

func TestScheduleOverlapPolicies(t *testing.T) {
	t0 := utc("2026-01-01T00:00:30Z")
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	slot := func(m int) string { return minute(m).Format(time.RFC3339) }
	newOverlap := func(t *testing.T, policy string) *rig {
		r := newRig(t, t0)
		r.starter.hold = true
		r.start(SchedulerOptions{PollInterval: time.Second}, book(t, "job", fmt.Sprintf(`{cron: "* * * * *", overlap: %s}`, policy)))
		r.clock.runUntil(t, minute(1))
		require.Equal(t, []string{slot(1)}, r.starter.slots(), "the first slot starts")
		return r
	}
	t.Run("skip drops a slot while a run is active", func(t *testing.T) {
		r := newOverlap(t, "skip")
		r.clock.runUntil(t, minute(2))
		assert.Equal(t, []string{slot(1)}, r.starter.slots())
		r.starter.finish("job")
		r.clock.runUntil(t, minute(3))
		assert.Equal(t, []string{slot(1), slot(3)}, r.starter.slots())
		assert.Equal(t, Stats{Started: 2, Skipped: 1}, r.sched.Stats())
	})
	t.Run("allow starts alongside the active run", func(t *testing.T) {
		r := newOverlap(t, "allow")
		r.clock.runUntil(t, minute(2))
		assert.Equal(t, []string{slot(1), slot(2)}, r.starter.slots())
		assert.Empty(t, r.starter.cancelled)
	})
	t.Run("replace cancels the active run and starts", func(t *testing.T) {
		r := newOverlap(t, "replace")
		r.clock.runUntil(t, minute(2))
		assert.Equal(t, []string{slot(1), slot(2)}, r.starter.slots())
		assert.Equal(t, []string{"run-1"}, r.starter.cancelled)
		assert.Equal(t, []string{"run-2"}, r.starter.Active("job"))
	})
	t.Run("queue keeps the newest slot and starts it once the playbook is idle", func(t *testing.T) {
		r := newOverlap(t, "queue")
		r.clock.runUntil(t, minute(3).Add(10*time.Second))
		assert.Equal(t, []string{slot(1)}, r.starter.slots(), "slots 2 and 3 wait")
		r.starter.finish("job")
		r.clock.runUntil(t, minute(3).Add(12*time.Second))
		assert.Equal(t, []string{slot(1), slot(3)}, r.starter.slots(), "the newer slot replaced the queued one")
		assert.Equal(t, int64(11000), r.starter.starts[1].Trigger["late_ms"], "started at the first poll after the run ended")
		assert.Equal(t, Stats{Started: 2, Queued: 2, Skipped: 1, MaxLate: 11 * time.Second}, r.sched.Stats())
	})
}

func TestScheduleCatchupAfterDowntime(t *testing.T) {
	hour := func(h int) time.Time {
		return utc("2026-05-01T00:00:00Z").Add(time.Duration(h) * time.Hour)
	}
	slot := func(h int) string { return hour(h).Format(time.RFC3339) }
	cases := []struct {
		name, schedule string
		want           []string // starts at the restart at 05:30
		dropped        int
	}{
		{"none skips the missed slots", `{cron: "@hourly"}`, nil, 4},
		{"none is the default", `{cron: "@hourly", catchup: none}`, nil, 4},
		{"latest fires the most recent missed slot once", `{cron: "@hourly", catchup: latest}`, []string{slot(5)}, 3},
		{"all fires every missed slot in order", `{cron: "@hourly", catchup: all}`, []string{slot(2), slot(3), slot(4), slot(5)}, 0},
		{"all drops slots older than the window", `{cron: "@hourly", catchup: all, catchup_window: 2h30m}`, []string{slot(3), slot(4), slot(5)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, hour(0).Add(30*time.Minute))
			pb := book(t, "hourly", tc.schedule)
			r.start(SchedulerOptions{}, pb)
			r.clock.runUntil(t, hour(1).Add(time.Minute))
			require.Equal(t, []string{slot(1)}, r.starter.slots())
			r.shutdown()

			r.clock.now = hour(5).Add(30 * time.Minute)
			r.start(SchedulerOptions{}, pb)
			assert.Equal(t, append([]string{slot(1)}, tc.want...), r.starter.slots())
			assert.Equal(t, Stats{Started: len(tc.want), Dropped: tc.dropped}, r.sched.Stats())
			for _, req := range r.starter.starts[1:] {
				assert.Positive(t, req.Trigger["late_ms"], "a catch-up start is late")
			}
			r.clock.runUntil(t, hour(6))
			assert.Equal(t, slot(6), r.starter.slots()[len(r.starter.slots())-1], "then the schedule continues")
		})
	}
	t.Run("all fires at most 100 slots, the newest", func(t *testing.T) {
		r := newRig(t, hour(0))
		pb := book(t, "minutely", `{cron: "* * * * *", catchup: all}`)
		r.start(SchedulerOptions{}, pb)
		r.shutdown()
		r.clock.now = hour(3)
		r.start(SchedulerOptions{}, pb)
		got := r.starter.slots()
		require.Len(t, got, 100)
		assert.Equal(t, hour(3).Add(-99*time.Minute).Format(time.RFC3339), got[0])
		assert.Equal(t, slot(3), got[99])
	})
}

func TestScheduleJitterDelaysEachSlotWithinTheBound(t *testing.T) {
	r := newRig(t, utc("2026-01-01T00:00:00Z"))
	var late []time.Duration
	r.start(SchedulerOptions{JitterSeed: 7, OnFire: func(f Firing) { late = append(late, f.Late) }},
		book(t, "jittery", `{cron: "* * * * *", jitter: 30s}`))
	r.clock.runUntil(t, utc("2026-01-01T01:00:30Z"))
	slots := r.starter.slots()
	require.Len(t, slots, 60)
	delays := map[time.Duration]bool{}
	for i, s := range slots {
		d := r.starter.at[i].Sub(utc(s))
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, 30*time.Second)
		delays[d] = true
		assert.Zero(t, late[i], "lateness excludes the intended jitter")
	}
	assert.Greater(t, len(delays), 30, "delays vary per slot")

	t.Run("the delay of a slot is the same after a restart", func(t *testing.T) {
		e := &entry{key: "k", trig: &playbook.Trigger{Schedule: &playbook.Schedule{Jitter: 30 * time.Second}}}
		a := NewScheduler(SchedulerOptions{JitterSeed: 7})
		b := NewScheduler(SchedulerOptions{JitterSeed: 7})
		at := utc("2026-01-01T00:05:00Z")
		assert.Equal(t, a.jitter(e, at), b.jitter(e, at))
		assert.NotEqual(t, a.jitter(e, at), a.jitter(e, at.Add(time.Minute)))
	})
}

func TestScheduleDoesNotFireASlotTwiceAcrossRestarts(t *testing.T) {
	r := newRig(t, utc("2026-01-01T00:30:00Z"))
	pb := book(t, "once", `{cron: "@hourly", catchup: all}`)
	r.start(SchedulerOptions{}, pb)
	r.clock.runUntil(t, utc("2026-01-01T01:00:00Z"))
	require.Equal(t, []string{"2026-01-01T01:00:00Z"}, r.starter.slots())

	for _, at := range []string{"2026-01-01T01:00:00Z", "2026-01-01T01:00:30Z", "2026-01-01T01:59:59Z"} {
		r.shutdown()
		r.clock.now = utc(at)
		r.start(SchedulerOptions{}, pb)
		assert.Equal(t, []string{"2026-01-01T01:00:00Z"}, r.starter.slots(), "restart at %s", at)
	}
	r.clock.runUntil(t, utc("2026-01-01T02:00:00Z"))
	assert.Equal(t, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}, r.starter.slots())
}

func TestScheduleSurvivesTheClockSteppingBackwards(t *testing.T) {
	r := newRig(t, utc("2026-01-01T00:30:00Z"))
	pb := book(t, "steady", `{cron: "@hourly", catchup: all}`)
	r.start(SchedulerOptions{}, pb)
	r.clock.runUntil(t, utc("2026-01-01T01:00:00Z"))
	require.Equal(t, []string{"2026-01-01T01:00:00Z"}, r.starter.slots())

	t.Run("while running: the recorded slot does not fire again", func(t *testing.T) {
		r.clock.wakeAt(t, utc("2026-01-01T00:10:00Z"))
		r.clock.runUntil(t, utc("2026-01-01T01:30:00Z"))
		assert.Equal(t, []string{"2026-01-01T01:00:00Z"}, r.starter.slots())
		r.clock.runUntil(t, utc("2026-01-01T02:00:00Z"))
		assert.Equal(t, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}, r.starter.slots(), "the scheduler keeps going")
	})
	t.Run("across a restart: catch-up does not fire recorded slots", func(t *testing.T) {
		r.shutdown()
		r.clock.now = utc("2026-01-01T00:20:00Z")
		r.start(SchedulerOptions{}, pb)
		r.clock.runUntil(t, utc("2026-01-01T02:30:00Z"))
		assert.Equal(t, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}, r.starter.slots())
		r.clock.runUntil(t, utc("2026-01-01T03:00:00Z"))
		assert.Equal(t, "2026-01-01T03:00:00Z", r.starter.slots()[2])
	})
}

func TestScheduleSetReplacesTheSchedules(t *testing.T) {
	r := newRig(t, utc("2026-01-01T00:00:30Z"))
	a := book(t, "a", `{cron: "* * * * *"}`)
	r.start(SchedulerOptions{}, a)
	r.clock.runUntil(t, utc("2026-01-01T00:01:00Z"))

	t.Run("a reloaded playbook with the same schedule keeps its state and runs the new snapshot", func(t *testing.T) {
		a2 := book(t, "a", `{cron: "* * * * *"}`)
		r.set(a2)
		r.clock.runUntil(t, utc("2026-01-01T00:02:00Z"))
		assert.Equal(t, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}, r.starter.slots())
		assert.Same(t, a2, r.starter.starts[1].Playbook)
	})
	t.Run("a removed playbook stops and an added one starts", func(t *testing.T) {
		r.set(book(t, "b", `{cron: "*/2 * * * *"}`))
		r.clock.runUntil(t, utc("2026-01-01T00:05:00Z"))
		var names []string
		for _, req := range r.starter.starts[2:] {
			names = append(names, req.Playbook.Name+"@"+req.Trigger["slot"].(string))
		}
		assert.Equal(t, []string{"b@2026-01-01T00:04:00Z"}, names)
	})
	t.Run("an empty set stops everything", func(t *testing.T) {
		r.set()
		n := len(r.starter.slots())
		r.clock.runUntil(t, utc("2026-01-01T00:10:00Z"))
		assert.Len(t, r.starter.slots(), n)
	})
}

func TestNextSlotsAreInTheTriggersZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	got, err := NextSlots(&playbook.Schedule{Cron: "30 2 * * *", Location: ny}, utc("2026-03-07T12:00:00Z"), 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "2026-03-09 02:30:00 EDT -0400", got[0].Format("2006-01-02 15:04:05 MST -0700"))
	assert.Equal(t, ny, got[0].Location())
}

// failingStarter fails every start.
type failingStarter struct{ fakeStarter }

func (f *failingStarter) Start(context.Context, StartRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, f.clock.Now())
	return "", fmt.Errorf("engine unavailable")
}

func TestScheduleRecordsTheSlotBeforeStarting(t *testing.T) {
	r := newRig(t, utc("2026-01-01T00:30:00Z"))
	pb := book(t, "flaky", `{cron: "@hourly", catchup: all}`)
	failing := &failingStarter{fakeStarter{clock: r.clock}}
	st, err := bolt.Open(r.path, bolt.Options{})
	require.NoError(t, err)
	var firings []Firing
	s := NewScheduler(SchedulerOptions{Store: st, Starter: failing, Clock: r.clock, MaxSleep: time.Hour,
		OnFire: func(f Firing) { firings = append(firings, f) }})
	s.Set([]*playbook.Playbook{pb})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	r.clock.idleAfter(t, 0)
	r.clock.runUntil(t, utc("2026-01-01T01:00:00Z"))
	cancel()
	<-done
	require.NoError(t, st.Close())
	require.Len(t, failing.at, 1, "the start was attempted")
	assert.Equal(t, Stats{Failed: 1}, s.Stats())
	require.Len(t, firings, 1)
	assert.ErrorContains(t, firings[0].Err, "engine unavailable")

	// As after a crash between the cursor write and the run commit: the
	// restart does not fire the slot again, even with catchup: all.
	r.clock.mu.Lock()
	r.clock.ch = nil
	r.clock.mu.Unlock()
	r.clock.now = utc("2026-01-01T01:10:00Z")
	r.start(SchedulerOptions{}, pb)
	r.clock.runUntil(t, utc("2026-01-01T02:00:00Z"))
	assert.Equal(t, []string{"2026-01-01T02:00:00Z"}, r.starter.slots())
}

// A firing that takes time must not push the next slot back by as much:
// the scheduler sleeps until the next slot counted from after the firing.
func TestScheduleSleepsFromTheEndOfAFiring(t *testing.T) {
	r := newRig(t, utc("2026-11-22T00:00:00.5Z"))
	r.starter.advance = 300 * time.Millisecond
	r.start(SchedulerOptions{}, book(t, "tick", `{cron: "* * * * * *"}`))
	r.clock.wakeAt(t, utc("2026-11-22T00:00:01Z"))
	require.Len(t, r.starter.slots(), 1)
	r.clock.mu.Lock()
	at := r.clock.at
	r.clock.mu.Unlock()
	assert.Equal(t, utc("2026-11-22T00:00:02Z"), at, "the next wake-up is the next slot, not the slot plus the firing's duration")
}
