package trigger

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A backfill lists the cron's own slots of the range, starts one run per
// slot the scheduler did not fire (each with its slot as trigger.slot),
// and a second backfill of the range starts nothing: the scheduler's
// runs and the backfill's are committed under the same slot claim. A
// range of more slots than the bound is refused before anything starts.
func TestABackfillStartsEachSlotOnceAndNoneTheSchedulerFired(t *testing.T) {
	minute := func(m int) time.Time { return utc("2026-01-01T00:00:00Z").Add(time.Duration(m) * time.Minute) }
	slot := func(m int) string { return minute(m).Format(time.RFC3339) }
	clock := &fakeClock{now: minute(0).Add(30 * time.Second)}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	defer st.Close()
	starter := &replicaStarter{prefix: "run"}
	pb := book(t, "job", `{cron: "* * * * *"}`)
	sched := NewScheduler(SchedulerOptions{Store: st, Starter: starter, Clock: clock, MaxSleep: time.Hour})
	sched.Set([]*playbook.Playbook{pb})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sched.Run(ctx) }()
	clock.idleAfter(t, 0)
	clock.runUntil(t, minute(3).Add(30*time.Second))
	cancel()
	<-done
	require.Equal(t, []string{slot(1), slot(2), slot(3)}, starter.launched(), "the scheduler fired minutes 1 to 3")
	clock.now = minute(6).Add(30 * time.Second) // minutes 4 to 6 passed with no scheduler

	outcomes := func(res []BackfilledSlot) map[string]string {
		m := map[string]string{}
		for _, r := range res {
			m[r.Slot.UTC().Format(time.RFC3339)] = r.Outcome
		}
		return m
	}
	b := Backfill{Store: st, Preparer: starter, Playbook: pb, From: minute(0), To: minute(6), Now: clock.Now, DryRun: true,
		Extra: map[string]any{"by": "alice", "via": ViaBackfill}}
	res, err := b.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{slot(0): BackfillWouldStart, slot(1): BackfillHasRun, slot(2): BackfillHasRun, slot(3): BackfillHasRun,
		slot(4): BackfillWouldStart, slot(5): BackfillWouldStart, slot(6): BackfillWouldStart}, outcomes(res))
	assert.Len(t, starter.launched(), 3, "a dry run starts nothing")

	b.DryRun = false
	res, err = b.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{slot(0): BackfillStarted, slot(1): BackfillHasRun, slot(2): BackfillHasRun, slot(3): BackfillHasRun,
		slot(4): BackfillStarted, slot(5): BackfillStarted, slot(6): BackfillStarted}, outcomes(res))
	assert.Equal(t, []string{slot(1), slot(2), slot(3), slot(0), slot(4), slot(5), slot(6)}, starter.launched())
	run, err := st.GetRun(context.Background(), res[4].Run)
	require.NoError(t, err)
	assert.Equal(t, slot(4), run.Trigger["slot"])
	assert.Equal(t, "alice", run.Trigger["by"])
	assert.Equal(t, ViaBackfill, run.Trigger["via"])

	res, err = b.Run(context.Background())
	require.NoError(t, err)
	for _, r := range res {
		assert.Equal(t, BackfillHasRun, r.Outcome, "a second backfill of the range: %s", r.Slot)
	}
	assert.Len(t, starter.launched(), 7, "a second backfill starts nothing")

	b.From, b.To, b.Max = minute(-20), minute(-10), 5
	_, err = b.Run(context.Background())
	require.Error(t, err)
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "more than 5 slots")
	assert.Len(t, starter.launched(), 7, "a refused range starts nothing")
}
