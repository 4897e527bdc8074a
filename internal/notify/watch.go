package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/state"
)

// Runs is what the Watcher reads of the store: runs and their steps.
type Runs interface {
	GetRun(ctx context.Context, id string) (*state.Run, error)
	ListRuns(ctx context.Context, f state.RunFilter) ([]*state.Run, error)
	Steps(ctx context.Context, runID string) ([]*state.StepRecord, error)
}

// Watcher finds the events of one replica: it is told of the events the
// engine records here (Observe), of schedule slots dropped and of webhook
// refusals, and it sweeps the store every Sweep for what nobody told it:
// runs that ended while the replica that ended them died before it
// enqueued their messages, approvals waiting, approvals and runs overdue.
// Every replica's Watcher does the same; the events' keys make one
// message of each.
type Watcher struct {
	Notifier *Notifier
	Runs     Runs
	Log      *slog.Logger
	// Sweep is how often the store is swept (default 15 s); Lookback how
	// far back a sweep looks for ended runs (default 10 min).
	Sweep, Lookback time.Duration
	Now             func() time.Time

	queue chan func(context.Context)
	once  sync.Once

	mu       sync.Mutex
	refusals map[string][]time.Time // by route
	told     map[string]time.Time   // a burst's event, by rule and route
	durs     map[string]durations   // by playbook, for percentiles
	dropped  map[droppedKey][]time.Time
	pruned   time.Time
}

type droppedKey struct {
	playbook string
	trigger  int
}

// Keep is how long sent messages are kept.
const Keep = 30 * 24 * time.Hour

type durations struct {
	at   time.Time
	sort []time.Duration
}

// sampleRuns is how many of a playbook's last successful runs a
// percentile is taken of, and minSamples how many it needs.
const sampleRuns, minSamples = 50, 5

func (w *Watcher) init() {
	w.once.Do(func() {
		w.queue = make(chan func(context.Context), 1024)
		if w.Sweep <= 0 {
			w.Sweep = 15 * time.Second
		}
		if w.Lookback <= 0 {
			w.Lookback = 10 * time.Minute
		}
		if w.Now == nil {
			w.Now = time.Now
		}
		if w.Log == nil {
			w.Log = slog.New(slog.DiscardHandler)
		}
		w.refusals = map[string][]time.Time{}
		w.durs = map[string]durations{}
		w.dropped = map[droppedKey][]time.Time{}
		w.told = map[string]time.Time{}
	})
}

// Run handles what it is told and sweeps until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	w.init()
	t := time.NewTicker(w.Sweep)
	defer t.Stop()
	w.SweepOnce(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case fn := <-w.queue:
			fn(ctx)
		case <-t.C:
			w.SweepOnce(ctx)
		}
	}
}

// do runs fn on the Watcher's goroutine: the engine's observer does not
// wait for the store.
func (w *Watcher) do(fn func(context.Context)) {
	w.init()
	select {
	case w.queue <- fn:
	default:
		// A full queue: the next sweep finds what this would have.
		w.Log.Warn("notification queue full; the next sweep finds the event")
	}
}

func (w *Watcher) notify(ctx context.Context, ev Event) {
	if ev.Time.IsZero() {
		ev.Time = w.Now()
	}
	if _, err := w.Notifier.Notify(ctx, ev); err != nil && ctx.Err() == nil {
		w.Log.Warn("enqueueing a notification", "event", ev.Key, "error", err)
	}
}

// Observe takes an event the engine recorded for run runID.
func (w *Watcher) Observe(runID string, ev state.Event) {
	switch ev.Type {
	case "run.failed", "run.cancelled", "run.succeeded":
		w.do(func(ctx context.Context) {
			r, err := w.Runs.GetRun(ctx, runID)
			if err != nil {
				return // the sweep finds it
			}
			w.runEnded(ctx, r)
		})
	case "approval.requested", "run.waiting":
		// The engine tells of a request before it records the step
		// waiting: look when the run has parked, and again a moment
		// later.
		check := func(ctx context.Context) { w.approvals(ctx, runID) }
		w.do(check)
		time.AfterFunc(time.Second, func() { w.do(check) })
	}
}

// approvals notifies the approvals run runID waits for.
func (w *Watcher) approvals(ctx context.Context, runID string) {
	if !w.wants(config.EventApprovalWaiting, config.EventApprovalOverdue) {
		return
	}
	r, err := w.Runs.GetRun(ctx, runID)
	if err != nil || r.Status != state.RunWaiting {
		return
	}
	steps, err := w.Runs.Steps(ctx, runID)
	if err != nil {
		return
	}
	for _, s := range steps {
		w.approval(ctx, r, s)
	}
}

func (w *Watcher) runEnded(ctx context.Context, r *state.Run) {
	if !w.wants(config.EventRunFailed, config.EventRunCancelled, config.EventRunSucceeded) {
		return
	}
	name := "run." + string(r.Status)
	if !slices.Contains([]string{config.EventRunFailed, config.EventRunCancelled, config.EventRunSucceeded}, name) {
		return
	}
	w.notify(ctx, Event{Name: name, Key: name + "/" + r.ID, Run: r, Playbook: r.Playbook, Time: r.EndedAt})
}

// approval notifies an approval step waiting, and overdue when a rule's
// after has passed.
func (w *Watcher) approval(ctx context.Context, r *state.Run, s *state.StepRecord) {
	if s.Status != state.StepWaiting || s.Approval == nil {
		return
	}
	base := Event{Run: r, Playbook: r.Playbook, Step: s.ID, Who: s.Approval.Approvers}
	ev := base
	ev.Name, ev.Key = config.EventApprovalWaiting, "approval.waiting/"+r.ID+"/"+s.ID
	w.notify(ctx, ev)
	if s.StartedAt.IsZero() {
		return
	}
	waited := w.Now().Sub(s.StartedAt)
	for _, rule := range w.Notifier.Rules {
		if !slices.Contains(rule.On, config.EventApprovalOverdue) || rule.After <= 0 || waited < rule.After {
			continue
		}
		ev := base
		ev.Name, ev.Rule = config.EventApprovalOverdue, rule.Name
		ev.Key = fmt.Sprintf("approval.overdue/%s/%s/%s", r.ID, s.ID, rule.After)
		ev.Detail = fmt.Sprintf("Waiting since %s, over %s.", s.StartedAt.UTC().Format(time.RFC3339), rule.After)
		w.notify(ctx, ev)
	}
}

// SweepOnce reads the store for the events nobody told: runs ended in the
// lookback, approvals waiting and overdue, runs overdue.
func (w *Watcher) SweepOnce(ctx context.Context) {
	w.init()
	now := w.Now()
	w.prune(ctx, now)
	if w.wants(config.EventRunFailed, config.EventRunCancelled, config.EventRunSucceeded) {
		ended, err := w.Runs.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunFailed, state.RunCancelled, state.RunSucceeded}, Limit: 200})
		if err != nil {
			w.logSweep(ctx, err)
			return
		}
		for _, r := range ended {
			if r.ParentID == "" && !r.EndedAt.IsZero() && now.Sub(r.EndedAt) < w.Lookback {
				w.runEnded(ctx, r)
			}
		}
	}
	if !w.wants(config.EventApprovalWaiting, config.EventApprovalOverdue, config.EventRunOverdue) {
		return
	}
	open, err := w.Runs.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunRunning, state.RunWaiting, state.RunSuspended}})
	if err != nil {
		w.logSweep(ctx, err)
		return
	}
	for _, r := range open {
		if r.ParentID != "" {
			continue
		}
		if r.Status == state.RunWaiting && w.wants(config.EventApprovalWaiting, config.EventApprovalOverdue) {
			w.approvals(ctx, r.ID)
		}
		w.runOverdue(ctx, r, now)
	}
}

// prune deletes, hourly, the messages sent longer than Keep ago.
func (w *Watcher) prune(ctx context.Context, now time.Time) {
	if now.Sub(w.pruned) < time.Hour {
		return
	}
	w.pruned = now
	if n, err := w.Notifier.Store.PruneNotifications(ctx, now.Add(-Keep)); err != nil {
		w.logSweep(ctx, err)
	} else if n > 0 {
		w.Log.Info("notifications pruned", "sent_before", now.Add(-Keep), "count", n)
	}
}

func (w *Watcher) logSweep(ctx context.Context, err error) {
	if ctx.Err() == nil {
		w.Log.Warn("notification sweep", "error", err)
	}
}

// wants reports whether a rule is on one of the events.
func (w *Watcher) wants(events ...string) bool {
	for _, r := range w.Notifier.Rules {
		for _, e := range events {
			if slices.Contains(r.On, e) {
				return true
			}
		}
	}
	return false
}

// runOverdue notifies run r unfinished past a run.overdue rule's after,
// or past its percentile of the playbook's recent successful durations.
func (w *Watcher) runOverdue(ctx context.Context, r *state.Run, now time.Time) {
	if r.StartedAt.IsZero() {
		return
	}
	took := now.Sub(r.StartedAt)
	for _, rule := range w.Notifier.Rules {
		if !slices.Contains(rule.On, config.EventRunOverdue) {
			continue
		}
		limit, what := rule.After, rule.After.String()
		if rule.Percentile > 0 {
			d, ok := w.percentile(ctx, r.Playbook, rule.Percentile)
			if !ok {
				continue
			}
			limit, what = d, fmt.Sprintf("p%d", rule.Percentile)
		}
		if limit <= 0 || took < limit {
			continue
		}
		detail := fmt.Sprintf("Running since %s, over %s.", r.StartedAt.UTC().Format(time.RFC3339), limit.Round(time.Second))
		if rule.Percentile > 0 {
			detail = fmt.Sprintf("Running since %s, longer than %s of its last successful runs (%s).",
				r.StartedAt.UTC().Format(time.RFC3339), what, limit.Round(time.Second))
		}
		w.notify(ctx, Event{Name: config.EventRunOverdue, Rule: rule.Name, Key: "run.overdue/" + r.ID + "/" + what,
			Run: r, Playbook: r.Playbook, Detail: detail})
	}
}

// percentile is the p-th percentile of playbook's last successful
// durations, read at most once a minute; false with fewer than
// minSamples.
func (w *Watcher) percentile(ctx context.Context, playbook string, p int) (time.Duration, bool) {
	w.mu.Lock()
	d, ok := w.durs[playbook]
	w.mu.Unlock()
	if !ok || w.Now().Sub(d.at) > time.Minute {
		runs, err := w.Runs.ListRuns(ctx, state.RunFilter{Playbook: playbook, Status: []state.RunStatus{state.RunSucceeded}, Limit: sampleRuns})
		if err != nil {
			return 0, false
		}
		d = durations{at: w.Now()}
		for _, r := range runs {
			if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() && r.ParentID == "" {
				d.sort = append(d.sort, r.EndedAt.Sub(r.StartedAt))
			}
		}
		sort.Slice(d.sort, func(i, j int) bool { return d.sort[i] < d.sort[j] })
		w.mu.Lock()
		w.durs[playbook] = d
		w.mu.Unlock()
	}
	if len(d.sort) < minSamples {
		return 0, false
	}
	i := (len(d.sort)*p + 99) / 100 // nearest rank
	return d.sort[min(max(i-1, 0), len(d.sort)-1)], true
}

// SlotDropped takes a slot of a playbook's schedule trigger that its
// catch-up policy did not fire. The slots of one catch-up come one by
// one: those dropped within a second make one schedule.missed event.
func (w *Watcher) SlotDropped(playbook string, trigger int, slot time.Time) {
	w.init()
	k := droppedKey{playbook, trigger}
	w.mu.Lock()
	defer w.mu.Unlock()
	first := len(w.dropped[k]) == 0
	w.dropped[k] = append(w.dropped[k], slot)
	if !first {
		return
	}
	time.AfterFunc(time.Second, func() {
		w.mu.Lock()
		slots := w.dropped[k]
		delete(w.dropped, k)
		w.mu.Unlock()
		w.do(func(ctx context.Context) { w.slotsDropped(ctx, k, slots) })
	})
}

func (w *Watcher) slotsDropped(ctx context.Context, k droppedKey, slots []time.Time) {
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	var list []string
	for _, s := range slots {
		list = append(list, s.UTC().Format(time.RFC3339))
	}
	detail := fmt.Sprintf("%d slot(s) of schedule trigger %d not fired (its catch-up policy): %s", len(slots), k.trigger, strings.Join(clipList(list, 10), ", "))
	w.notify(ctx, Event{Name: config.EventScheduleMissed, Playbook: k.playbook, Detail: detail,
		Key: fmt.Sprintf("schedule.missed/%s/%d/%s", k.playbook, k.trigger, list[0])})
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("and %d more", len(l)-n))
}

// Refused counts a refused delivery of webhook route route: a rule's
// burst of refusals within its window makes a delivery.refused event,
// then none from this replica for a window; the event's key is the
// window it fell in, so replicas that each see a burst in one window
// make one message.
func (w *Watcher) Refused(route string) {
	w.init()
	now := w.Now()
	w.mu.Lock()
	longest := time.Duration(0)
	for _, r := range w.Notifier.Rules {
		if slices.Contains(r.On, config.EventDeliveryRefused) {
			longest = max(longest, r.Window)
		}
	}
	if longest == 0 {
		w.mu.Unlock()
		return
	}
	times := append(w.refusals[route], now)
	for len(times) > 0 && now.Sub(times[0]) > longest {
		times = times[1:]
	}
	w.refusals[route] = times
	times = slices.Clone(times)
	w.mu.Unlock()
	for _, r := range w.Notifier.Rules {
		if !slices.Contains(r.On, config.EventDeliveryRefused) {
			continue
		}
		n := 0
		for _, at := range times {
			if now.Sub(at) <= r.Window {
				n++
			}
		}
		if n < r.Burst {
			continue
		}
		w.mu.Lock()
		last, told := w.told[r.Name+"\x00"+route]
		if !told || now.Sub(last) >= r.Window {
			w.told[r.Name+"\x00"+route] = now
		}
		w.mu.Unlock()
		if told && now.Sub(last) < r.Window {
			continue // this replica told of this burst already
		}
		bucket := now.Truncate(r.Window)
		ev := Event{Name: config.EventDeliveryRefused, Rule: r.Name, Route: route, Time: now,
			Key:    fmt.Sprintf("delivery.refused/%s/%s/%s", route, r.Name, bucket.UTC().Format(time.RFC3339)),
			Detail: fmt.Sprintf("%d deliveries refused within %s (see runbook's log and the UI's Deliveries page).", n, r.Window)}
		w.do(func(ctx context.Context) { w.notify(ctx, ev) })
	}
}
