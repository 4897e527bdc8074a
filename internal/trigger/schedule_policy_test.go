package trigger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func TestScheduleQueuedSlotWaitsOnePollInterval(t *testing.T) {
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	cases := []struct {
		name string
		poll time.Duration
		late time.Duration // of the queued slot 3, its playbook idle from 3:10
	}{
		{"the default poll interval is a second", 0, 11 * time.Second},
		{"a configured poll interval is kept", 5 * time.Second, 15 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, minute(0).Add(30*time.Second))
			r.starter.hold = true
			r.start(SchedulerOptions{PollInterval: c.poll}, book(t, "job", `{cron: "* * * * *", overlap: queue}`))
			r.clock.runUntil(t, minute(3).Add(10*time.Second))
			require.Equal(t, []string{minute(1).Format(time.RFC3339)}, r.starter.slots())
			r.starter.finish("job")
			r.clock.runUntil(t, minute(3).Add(20*time.Second))
			require.Equal(t, []string{minute(1).Format(time.RFC3339), minute(3).Format(time.RFC3339)}, r.starter.slots())
			assert.Equal(t, c.late.Milliseconds(), r.starter.starts[1].Trigger["late_ms"], "started at the first poll after the run ended")
		})
	}
}

func TestScheduleCatchupLatestWithNothingInTheWindow(t *testing.T) {
	hour := func(h int) time.Time { return utc("2026-05-01T00:00:00Z").Add(time.Duration(h) * time.Hour) }
	r := newRig(t, hour(0).Add(30*time.Minute))
	pb := book(t, "hourly", `{cron: "@hourly", catchup: latest, catchup_window: 10m}`)
	r.start(SchedulerOptions{}, pb)
	r.shutdown()

	r.clock.now = hour(5).Add(30 * time.Minute) // slots 1 to 5 passed, none in the last 10 minutes
	r.start(SchedulerOptions{}, pb)
	assert.Empty(t, r.starter.slots(), "nothing to catch up within the window")
	assert.Equal(t, Stats{}, r.sched.Stats())
	r.clock.runUntil(t, hour(6))
	assert.Equal(t, []string{hour(6).Format(time.RFC3339)}, r.starter.slots(), "then the schedule continues")
}

func TestCursorKey(t *testing.T) {
	seoul, err := time.LoadLocation("Asia/Seoul")
	require.NoError(t, err)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	base := CursorKey("pb", 0, &playbook.Schedule{Cron: "0 9 * * *", Location: seoul})
	cases := []struct {
		name  string
		pb    string
		index int
		sch   *playbook.Schedule
		same  bool
	}{
		{"the same schedule keeps its key", "pb", 0, &playbook.Schedule{Cron: "0 9 * * *", Location: seoul}, true},
		{"another cron starts a fresh history", "pb", 0, &playbook.Schedule{Cron: "0 10 * * *", Location: seoul}, false},
		{"another zone starts a fresh history", "pb", 0, &playbook.Schedule{Cron: "0 9 * * *", Location: ny}, false},
		{"no zone is not Seoul", "pb", 0, &playbook.Schedule{Cron: "0 9 * * *"}, false},
		{"another trigger index has its own key", "pb", 1, &playbook.Schedule{Cron: "0 9 * * *", Location: seoul}, false},
		{"another playbook has its own key", "other", 0, &playbook.Schedule{Cron: "0 9 * * *", Location: seoul}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := CursorKey(c.pb, c.index, c.sch)
			assert.Equal(t, c.same, key == base, "%s vs %s", key, base)
			assert.Contains(t, key, fmt.Sprintf("schedule/%s/%d/", c.pb, c.index))
		})
	}
	t.Run("no zone is UTC", func(t *testing.T) {
		assert.Equal(t, CursorKey("pb", 0, &playbook.Schedule{Cron: "@hourly"}), CursorKey("pb", 0, &playbook.Schedule{Cron: "@hourly", Location: time.UTC}))
	})
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestScheduleRemovedWithAQueuedSlotIsLogged(t *testing.T) {
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	var logs logBuffer
	r := newRig(t, minute(0).Add(30*time.Second))
	r.starter.hold = true
	queued := book(t, "queued", `{cron: "* * * * *", overlap: queue}`)
	other := book(t, "other", `{cron: "0 * * * *", overlap: queue}`)
	r.start(SchedulerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, queued, other)
	r.clock.runUntil(t, minute(2).Add(10*time.Second))
	require.Equal(t, []string{minute(1).Format(time.RFC3339)}, r.starter.slots(), "slot 2 is queued")

	r.set(other)
	assert.Contains(t, logs.String(), `msg="schedule removed with a queued slot" playbook=queued`)
	r.starter.finish("queued")
	r.clock.runUntil(t, minute(5))
	assert.Len(t, r.starter.slots(), 1, "the removed schedule's queued slot never starts")
}

// runScheduler runs a scheduler with opts over a store at r.path, r's
// clock and starter (unlike r.start, it leaves opts.MaxSleep as given),
// and waits until it sleeps.
func runScheduler(t *testing.T, r *rig, opts SchedulerOptions, wrap func(state.Store) state.Store, pbs ...*playbook.Playbook) *Scheduler {
	t.Helper()
	st, err := bolt.Open(r.path, bolt.Options{NoSync: true})
	require.NoError(t, err)
	opts.Store, opts.Starter, opts.Clock = wrap(st), r.starter, r.clock
	s := NewScheduler(opts)
	s.Set(pbs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		require.NoError(t, st.Close())
	})
	r.clock.idleAfter(t, 0)
	return s
}

func TestSchedulerLooksAtTheClockAtLeastEveryMaxSleep(t *testing.T) {
	cases := []struct {
		name     string
		maxSleep time.Duration
		want     time.Duration
	}{
		{"by default every minute", 0, DefaultMaxSleep},
		{"a configured MaxSleep is kept", 10 * time.Minute, 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, utc("2026-01-01T00:00:00Z"))
			runScheduler(t, r, SchedulerOptions{MaxSleep: c.maxSleep}, func(s state.Store) state.Store { return s },
				book(t, "daily", `{cron: "0 9 * * *"}`))
			r.clock.mu.Lock()
			defer r.clock.mu.Unlock()
			assert.Equal(t, c.want, r.clock.at.Sub(r.clock.now), "the slot is 9 hours away")
		})
	}
}

// cursorsFail is a store whose PutCursor fails once fail is set.
type cursorsFail struct {
	state.Store
	fail *atomic.Bool
}

func (s cursorsFail) PutCursor(ctx context.Context, key string, val []byte) error {
	if s.fail.Load() {
		return errors.New("disk full")
	}
	return s.Store.PutCursor(ctx, key, val)
}

func TestScheduleSkippedSlotCursorFailureIsLogged(t *testing.T) {
	const logged = "schedule cursor not saved"
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	cases := []struct {
		name string
		fail bool
	}{
		{"a skipped slot recorded is not reported", false},
		{"a skipped slot whose cursor cannot be written is logged", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs logBuffer
			var fail atomic.Bool
			r := newRig(t, minute(0).Add(30*time.Second))
			r.starter.hold = true
			s := runScheduler(t, r, SchedulerOptions{MaxSleep: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
				func(st state.Store) state.Store { return cursorsFail{st, &fail} },
				book(t, "job", `{cron: "* * * * *", overlap: skip}`))
			r.clock.runUntil(t, minute(1))
			require.Len(t, r.starter.slots(), 1, "slot 1 started and is still running")
			fail.Store(c.fail)
			r.clock.runUntil(t, minute(2))
			assert.Equal(t, Stats{Started: 1, Skipped: 1}, s.Stats(), "slot 2 skipped")
			if c.fail {
				assert.Contains(t, logs.String(), logged)
				assert.Contains(t, logs.String(), "disk full")
			} else {
				assert.NotContains(t, logs.String(), logged)
			}
		})
	}
}
