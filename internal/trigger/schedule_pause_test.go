package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// refresh calls Refresh and waits until the scheduler slept again.
func (r *rig) refresh() {
	r.t.Helper()
	r.clock.mu.Lock()
	n := r.clock.calls
	r.clock.mu.Unlock()
	r.sched.Refresh()
	r.clock.idleAfter(r.t, n)
}

// A paused trigger starts no run: each slot that comes is reported skipped
// with the pause's reason and noted in the store, and the cursor stays at
// the last slot handled before the pause. After the resume, the slots
// that passed meanwhile follow the trigger's catch-up policy.
func TestAPausedScheduleSkipsItsSlotsAndCatchesUpPerItsPolicyAfterTheResume(t *testing.T) {
	hour := func(h int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(h) * time.Hour) }
	slot := func(h int) string { return hour(h).Format(time.RFC3339) }
	for _, tc := range []struct {
		catchup string
		want    []string // slots started, the first before the pause
	}{
		{"latest", []string{slot(1), slot(4)}},
		{"all", []string{slot(1), slot(2), slot(3), slot(4)}},
		{"none", []string{slot(1)}},
	} {
		t.Run("catchup "+tc.catchup, func(t *testing.T) {
			r := newRig(t, hour(0).Add(30*time.Minute))
			var firings []Firing
			pb := book(t, "hourly", fmt.Sprintf(`{cron: "0 * * * *", catchup: %s}`, tc.catchup))
			r.start(SchedulerOptions{OnFire: func(f Firing) { firings = append(firings, f) }}, pb)
			r.clock.runUntil(t, hour(1).Add(30*time.Minute))
			require.Equal(t, []string{slot(1)}, r.starter.slots())

			ctx := context.Background()
			require.NoError(t, r.store.PauseSchedule(ctx, state.SchedulePause{Playbook: "hourly", Trigger: state.AllTriggers, Reason: "change freeze", By: "alice"}))
			r.refresh()
			r.clock.runUntil(t, hour(4).Add(30*time.Minute))
			assert.Equal(t, []string{slot(1)}, r.starter.slots(), "no run while paused")
			var skipped []string
			for _, f := range firings {
				if f.Outcome == Skipped {
					skipped = append(skipped, f.Slot.UTC().Format(time.RFC3339))
					assert.Equal(t, "schedule paused by alice: change freeze", f.Reason)
				}
			}
			assert.Equal(t, []string{slot(2), slot(3), slot(4)}, skipped)
			key := CursorKey("hourly", 0, pb.Triggers[0].Schedule)
			raw, err := r.store.DedupGet(ctx, PausedSlotKey(key, hour(3)))
			require.NoError(t, err, "a paused slot is noted in the store")
			var note PausedSlot
			require.NoError(t, json.Unmarshal(raw, &note))
			assert.Equal(t, PausedSlot{By: "alice", Reason: "change freeze"}, note)
			cur, err := r.store.GetCursor(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, hour(1).Format(time.RFC3339Nano), string(cur), "the cursor stays at the last slot handled before the pause")

			_, err = r.store.ResumeSchedule(ctx, "hourly", state.AllTriggers)
			require.NoError(t, err)
			r.refresh()
			assert.Equal(t, tc.want, r.starter.slots(), "at the resume, before the next slot")
			r.clock.runUntil(t, hour(5))
			assert.Equal(t, append(tc.want, slot(5)), r.starter.slots(), "the next slot fires")
		})
	}
}

// A pause recorded by another process (a replica, the CLI on the state)
// is read from the store at the next slot, without Refresh; so is a pause
// of one trigger, which leaves the playbook's other triggers firing.
func TestAPauseRecordedElsewhereHoldsFromTheNextSlot(t *testing.T) {
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	r := newRig(t, minute(0).Add(30*time.Second))
	pb := book(t, "two", `{cron: "* * * * *"}`)
	second := *pb.Triggers[0]
	sch := *second.Schedule
	sch.Cron = "*/2 * * * *"
	second.Schedule = &sch
	pb.Triggers = append(pb.Triggers, &second)
	r.start(SchedulerOptions{}, pb)
	require.NoError(t, r.store.PauseSchedule(context.Background(), state.SchedulePause{Playbook: "two", Trigger: 0, Reason: "noisy", By: "bob"}))
	r.clock.runUntil(t, minute(4))
	want := []string{minute(2).Format(time.RFC3339), minute(4).Format(time.RFC3339)}
	assert.Equal(t, want, r.starter.slots(), "trigger 0 paused, trigger 1 fires")
	assert.Equal(t, 4, r.sched.Stats().Skipped)
}
