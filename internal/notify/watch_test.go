package notify_test

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// watchRig is a Watcher over a real bbolt file with a clock the test
// moves; the outbox is read back to see what it enqueued.
type watchRig struct {
	store *bolt.Store
	w     *notify.Watcher
	mu    sync.Mutex
	now   time.Time
}

var t0 = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

func newWatchRig(t *testing.T, rules string) *watchRig {
	t.Helper()
	cfg, err := config.Parse("rb.yaml", []byte(`notifications:
  channels:
    c: {kind: slack, url: "http://127.0.0.1:9/x"}
  rules:
`+rules))
	require.NoError(t, err)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	r := &watchRig{store: st, now: t0}
	n := &notify.Notifier{Rules: cfg.Notifications.Rules, Store: st}
	r.w = &notify.Watcher{Notifier: n, Runs: st, Now: r.clock}
	return r
}

func (r *watchRig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func (r *watchRig) advance(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
}

// keys are the outbox's keys, sorted.
func (r *watchRig) keys(t *testing.T) []string {
	t.Helper()
	ns, err := r.store.ListNotifications(context.Background(), state.NotificationFilter{})
	require.NoError(t, err)
	out := []string{}
	for _, n := range ns {
		out = append(out, n.Key)
	}
	sort.Strings(out)
	return out
}

func (r *watchRig) run(t *testing.T, run *state.Run, steps ...*state.StepRecord) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, r.store.CreateRun(ctx, run))
	for _, s := range steps {
		s.RunID = run.ID
		require.NoError(t, r.store.SaveStep(ctx, s))
	}
}

func TestAnApprovalIsOverdueOnceItHasWaitedLongerThanTheRulesAfter(t *testing.T) {
	r := newWatchRig(t, `    - {name: slow-answers, on: [approval.waiting, approval.overdue], after: 1h, channels: [c]}
`)
	ctx := context.Background()
	r.run(t, &state.Run{ID: "w1", Playbook: "upgrade", Status: state.RunWaiting, StartedAt: t0},
		&state.StepRecord{ID: "gate", Status: state.StepWaiting, StartedAt: t0, Approval: &state.ApprovalRequest{Approvers: []string{"alice"}}})
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"approval.waiting/w1/gate@c"}, r.keys(t), "waiting, not overdue yet")
	r.advance(59 * time.Minute)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"approval.waiting/w1/gate@c"}, r.keys(t), "59 minutes: not overdue")
	r.advance(2 * time.Minute)
	r.w.SweepOnce(ctx)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"approval.overdue/w1/gate/1h0m0s@c", "approval.waiting/w1/gate@c"}, r.keys(t), "overdue once, however many sweeps")
	n, err := r.store.GetNotification(ctx, "approval.overdue/w1/gate/1h0m0s@c")
	require.NoError(t, err)
	assert.Equal(t, "the approval at step gate of upgrade is overdue", n.Subject)
	assert.Contains(t, n.Text, "Who may answer: alice")
	assert.Contains(t, n.Text, "over 1h0m0s")
}

func TestARunIsOverdueAfterADurationOrItsPlaybooksPercentile(t *testing.T) {
	r := newWatchRig(t, `    - {name: two-hours, on: [run.overdue], after: 2h, channels: [c]}
    - {name: usual, on: [run.overdue], after: p90, playbooks: [nightly], channels: [c]}
`)
	ctx := context.Background()
	// nightly took 10..19 minutes the last ten times; its p90 is 18 min.
	for i := range 10 {
		start := t0.Add(-time.Duration(48-i) * time.Hour)
		r.run(t, &state.Run{ID: "ok" + string(rune('a'+i)), Playbook: "nightly", Status: state.RunSucceeded,
			StartedAt: start, EndedAt: start.Add(time.Duration(10+i) * time.Minute)})
	}
	r.run(t, &state.Run{ID: "n1", Playbook: "nightly", Status: state.RunRunning, StartedAt: t0})
	r.run(t, &state.Run{ID: "o1", Playbook: "other", Status: state.RunRunning, StartedAt: t0})
	r.advance(17 * time.Minute)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{}, r.keys(t), "17 minutes: within nightly's p90")
	r.advance(2 * time.Minute)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"run.overdue/n1/p90@c"}, r.keys(t), "19 minutes: past nightly's p90 (18 min); other has no history and no p90 rule")
	n, err := r.store.GetNotification(ctx, "run.overdue/n1/p90@c")
	require.NoError(t, err)
	assert.Equal(t, "nightly is overdue", n.Subject)
	assert.Contains(t, n.Text, "longer than p90 of its last successful runs (18m0s)")
	r.advance(2 * time.Hour)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"run.overdue/n1/2h0m0s@c", "run.overdue/n1/p90@c", "run.overdue/o1/2h0m0s@c"}, r.keys(t))
}

func TestAPlaybookWithTooFewSuccessesHasNoPercentileYet(t *testing.T) {
	r := newWatchRig(t, `    - {name: usual, on: [run.overdue], after: p95, channels: [c]}
`)
	ctx := context.Background()
	for i := range 4 {
		start := t0.Add(-time.Duration(10-i) * time.Hour)
		r.run(t, &state.Run{ID: "ok" + string(rune('a'+i)), Playbook: "new", Status: state.RunSucceeded, StartedAt: start, EndedAt: start.Add(time.Minute)})
	}
	r.run(t, &state.Run{ID: "n1", Playbook: "new", Status: state.RunRunning, StartedAt: t0})
	r.advance(24 * time.Hour)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{}, r.keys(t), "four successes are too few for a percentile")
}

func TestARunEndedWhileNobodyToldIsFoundBySweeping(t *testing.T) {
	r := newWatchRig(t, `    - {name: failures, on: [run.failed, run.cancelled], channels: [c]}
`)
	ctx := context.Background()
	r.run(t, &state.Run{ID: "f1", Playbook: "p", Status: state.RunFailed, StartedAt: t0, EndedAt: t0.Add(time.Minute)})
	r.run(t, &state.Run{ID: "s1", Playbook: "p", Status: state.RunSucceeded, StartedAt: t0, EndedAt: t0.Add(time.Minute)})
	r.run(t, &state.Run{ID: "sub", Playbook: "p", Status: state.RunFailed, ParentID: "f1", StartedAt: t0, EndedAt: t0.Add(time.Minute)})
	r.run(t, &state.Run{ID: "old", Playbook: "p", Status: state.RunCancelled, StartedAt: t0.Add(-time.Hour), EndedAt: t0.Add(-time.Hour)})
	r.advance(2 * time.Minute)
	r.w.SweepOnce(ctx)
	assert.Equal(t, []string{"run.failed/f1@c"}, r.keys(t),
		"the failed top-level run ended within the lookback; not the success (no rule), the sub-playbook run, nor the run that ended long before")
}

func TestRefusalsMakeOneEventPerBurstWindow(t *testing.T) {
	r := newWatchRig(t, `    - {name: refusals, on: [delivery.refused], burst: 3, within: 1m, channels: [c]}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.w.Run(ctx)
	r.w.Refused("sms")
	r.advance(10 * time.Second)
	r.w.Refused("sms")
	r.w.Refused("other")
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []string{}, r.keys(t), "two refusals of sms: below the burst")
	r.advance(10 * time.Second)
	r.w.Refused("sms")
	r.w.Refused("sms")
	waitFor(t, 5*time.Second, "the burst's event", func() bool { return len(r.keys(t)) == 1 })
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []string{"delivery.refused/sms/refusals/2026-11-29T03:00:00Z@c"}, r.keys(t), "one event for the window, not one per refusal past the burst")
	n, err := r.store.GetNotification(ctx, r.keys(t)[0])
	require.NoError(t, err)
	assert.Equal(t, "webhook route sms refuses deliveries", n.Subject)
}

func TestTheSlotsOfOneCatchUpMakeOneMissedEvent(t *testing.T) {
	r := newWatchRig(t, `    - {name: missed, on: [schedule.missed], playbooks: ["nightly-*"], channels: [c]}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.w.Run(ctx)
	for i := range 5 {
		r.w.SlotDropped("nightly-resize", 0, t0.Add(time.Duration(i)*time.Hour))
	}
	r.w.SlotDropped("weekly", 0, t0)
	waitFor(t, 5*time.Second, "the missed event", func() bool { return len(r.keys(t)) == 1 })
	time.Sleep(1500 * time.Millisecond)
	keys := r.keys(t)
	assert.Equal(t, []string{"schedule.missed/nightly-resize/0/2026-11-29T03:00:00Z@c"}, keys)
	n, err := r.store.GetNotification(ctx, keys[0])
	require.NoError(t, err)
	assert.Equal(t, "nightly-resize missed schedule slots", n.Subject)
	assert.Contains(t, n.Text, "5 slot(s) of schedule trigger 0 not fired")
}
