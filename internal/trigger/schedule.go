package trigger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// cronParser parses schedule triggers exactly as the playbook loader
// validates them: 5 fields, 6 with seconds first, descriptors, and a
// CRON_TZ= (or TZ=) prefix.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

const (
	// DefaultCatchupWindow bounds catch-up when a trigger sets no
	// catchup_window: missed slots older than this are dropped.
	DefaultCatchupWindow = 24 * time.Hour
	// MaxCatchupSlots caps the missed slots one trigger fires at once
	// (catchup: all); the oldest beyond the cap are dropped.
	MaxCatchupSlots = 100
	// DefaultMaxSleep is the longest the scheduler sleeps without looking
	// at the wall clock again, so a clock step is noticed promptly (timers
	// run on the monotonic clock and do not see wall-clock steps).
	DefaultMaxSleep = time.Minute
	// DefaultPollInterval is how often a queued slot (overlap: queue)
	// checks whether the playbook's active runs have ended.
	DefaultPollInterval = time.Second
)

// Clock is the scheduler's time source. Tests inject a fake that advances
// deterministically; After is called once per scheduler loop iteration,
// and the channel of a previous call is never read again.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// SchedulerOptions configures a Scheduler. Store and Starter are required.
type SchedulerOptions struct {
	Store   state.Store
	Starter Starter
	Clock   Clock        // nil: SystemClock
	Logger  *slog.Logger // nil: discard
	// JitterSeed perturbs the per-slot jitter. The delay of a slot is a
	// hash of the seed, the trigger and the slot, uniform in [0, jitter):
	// deterministic per slot, so a restart computes the same delay.
	JitterSeed uint64
	// MaxSleep and PollInterval default to DefaultMaxSleep and
	// DefaultPollInterval.
	MaxSleep     time.Duration
	PollInterval time.Duration
	// OnFire, when set, is called after every slot the scheduler handles
	// (started, skipped, queued, dropped or failed), from the Run goroutine.
	OnFire func(Firing)
	// Leader, when set, makes several schedulers on one shared store
	// (replicas) take turns: only the holder of the leader lease fires,
	// and each slot is committed with its run under a unique claim, so a
	// slot fires once even when two think they lead (schedule_lease.go).
	// Holder names this scheduler to the others; LeaderTTL is the
	// lease's (default 10 s).
	Leader    Leader
	Holder    string
	LeaderTTL time.Duration
}

// Outcome is what happened to one slot.
type Outcome string

// The outcomes of a slot.
const (
	Started Outcome = "started" // the run was started
	Skipped Outcome = "skipped" // overlap: skip with a run active, a queued slot replaced by a newer one, or the trigger paused
	Queued  Outcome = "queued"  // overlap: queue with a run active; starts when the playbook is idle
	Dropped Outcome = "dropped" // a missed slot the catch-up policy does not fire
	Failed  Outcome = "failed"  // the cursor write or Starter.Start failed
)

// Firing reports one handled slot, for metrics.
type Firing struct {
	Playbook string
	Trigger  int // index in the playbook's triggers
	Slot     time.Time
	Outcome  Outcome
	RunID    string // Started; Failed when the Starter recorded the failed run
	// Late is the actual start minus the intended fire time (slot plus
	// jitter), for Started on-time slots; catch-up starts are late on
	// purpose and report Catchup instead.
	Late    time.Duration
	Catchup bool
	Err     error  // Failed only
	Reason  string // Skipped by a pause: who paused the trigger and why
}

// Stats counts the slots handled since the scheduler was created.
type Stats struct {
	Started, Skipped, Queued, Dropped, Failed int
	// MaxLate is the largest Late of an on-time start.
	MaxLate time.Duration
}

// Scheduler fires the schedule triggers of a set of playbooks. Create it
// with NewScheduler, give it playbooks with Set (at any time: a reload
// replaces the set) and call Run once.
//
// Exactly-once per slot: the scheduler persists each slot as handled (a
// cursor per trigger, see CursorKey) before calling Starter.Start, and
// never fires a slot at or before the persisted one. A crash between the
// cursor write and the run commit therefore drops that one slot rather
// than firing it twice on restart; the drop is the chosen side of the
// tradeoff (a maintenance job fired twice does more harm than one missed
// and logged). A trigger seen for the first time records the current time
// as its cursor, so downtime after that is caught up per its policy. A
// slot whose Starter.Start fails is logged and counted (Failed), not
// retried.
//
// Slots: the awaited slot fires when due (plus its jitter), however late.
// Slots that passed without being awaited (downtime before Run, or a
// suspended process or forward clock jump while running) are missed and
// follow the catch-up policy (none, latest, all), bounded by the window
// and MaxCatchupSlots. Catch-up slots fire at once, without jitter, and go
// through the overlap policy like any other.
//
// Overlap: skip records the slot as handled without a run; allow starts
// alongside; replace cancels the active runs, then starts; queue keeps at
// most one slot per trigger (a newer one replaces it, the older counted as
// skipped) and starts it at the first check, every PollInterval, that
// finds the playbook idle. A queued slot is recorded only when it starts,
// so one still waiting at shutdown is a missed slot after the restart.
//
// Clock steps: a slot is fired only if it is after the last handled one,
// so a clock stepping backwards delays the schedule (the awaited slot
// stays the one after the recorded slot) but never repeats a slot.
type Scheduler struct {
	opts SchedulerOptions
	log  *slog.Logger

	mu      sync.Mutex
	desired []*playbook.Playbook // from Set, applied by Run
	dirty   bool
	stats   Stats
	wake    chan struct{}

	entries map[string]*entry // Run goroutine only

	leading atomic.Bool // under a Leader: this scheduler holds the lease (Leading)
}

// entry is one schedule trigger of one playbook.
type entry struct {
	key     string
	pb      *playbook.Playbook
	index   int
	trig    *playbook.Trigger
	sched   cron.Schedule
	loc     *time.Location
	last    time.Time            // newest slot handled (the persisted cursor)
	next    time.Time            // the slot awaited
	queue   []queued             // slots to fire now, in order (the awaited one, catch-up)
	pending time.Time            // overlap: queue — the slot waiting for an idle playbook
	paused  *state.SchedulePause // the pause read before the last tick (schedule_pause.go)
}

// queued is a slot due to fire.
type queued struct {
	slot    time.Time
	catchup bool // from the catch-up policy, not the awaited slot
}

// NewScheduler returns a scheduler with no playbooks.
func NewScheduler(opts SchedulerOptions) *Scheduler {
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.MaxSleep <= 0 {
		opts.MaxSleep = DefaultMaxSleep
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{opts: opts, log: log, wake: make(chan struct{}, 1), entries: map[string]*entry{}}
}

// Set replaces the playbooks whose schedule triggers fire. A trigger whose
// playbook name, index, cron and zone are unchanged keeps its state (its
// awaited and queued slots) and starts runs of the new playbook; a new one
// loads its cursor and catches up; a removed one stops (its queued slot is
// forgotten). Set does no I/O: Run applies the set.
func (s *Scheduler) Set(playbooks []*playbook.Playbook) {
	s.mu.Lock()
	s.desired = append([]*playbook.Playbook(nil), playbooks...)
	s.dirty = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters so far.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Run fires slots until ctx ends, then returns ctx's error. Errors of the
// store or the starter are logged and counted, never fatal.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.opts.Leader != nil {
		return s.runLeased(ctx)
	}
	return s.run(ctx)
}

func (s *Scheduler) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.sync(ctx)
		wait := s.tick(ctx)
		select {
		case <-s.wake: // a Set came meanwhile: apply it without starting a timer
			continue
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-s.opts.Clock.After(wait):
		}
	}
}

// CursorKey is the state-store key of a trigger's last handled slot. The
// hash of the cron expression and zone means an edited schedule starts a
// fresh history instead of catching up slots of the old one.
func CursorKey(playbookName string, index int, sch *playbook.Schedule) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s", sch.Cron, locName(sch.Location))
	return fmt.Sprintf("schedule/%s/%d/%016x", playbookName, index, h.Sum64())
}

func locName(loc *time.Location) string {
	if loc == nil {
		return "UTC"
	}
	return loc.String()
}

// sync applies the set given to Set, if it changed.
func (s *Scheduler) sync(ctx context.Context) {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return
	}
	desired := s.desired
	s.dirty = false
	s.mu.Unlock()

	now := s.opts.Clock.Now()
	keep := map[string]*entry{}
	for _, pb := range desired {
		for i, t := range pb.Triggers {
			if t.Schedule == nil {
				continue
			}
			key := CursorKey(pb.Name, i, t.Schedule)
			if e, ok := s.entries[key]; ok {
				e.pb, e.trig = pb, t
				keep[key] = e
				continue
			}
			e, err := s.load(ctx, pb, i, t, now)
			if err != nil {
				s.log.Error("schedule not loaded", "playbook", pb.Name, "trigger", i, "err", err)
				continue
			}
			keep[key] = e
		}
	}
	for key, e := range s.entries {
		if keep[key] == nil && !e.pending.IsZero() {
			s.log.Warn("schedule removed with a queued slot", "playbook", e.pb.Name, "trigger", e.index, "slot", e.pending)
		}
	}
	s.entries = keep
}

// load builds the entry of a new trigger: reads its cursor and queues the
// slots missed since then, per its catch-up policy.
func (s *Scheduler) load(ctx context.Context, pb *playbook.Playbook, i int, t *playbook.Trigger, now time.Time) (*entry, error) {
	sched, err := cronParser.Parse(t.Schedule.Cron)
	if err != nil {
		return nil, fmt.Errorf("parse cron %q: %w", t.Schedule.Cron, err)
	}
	loc := Zone(sched, t.Schedule.Location)
	e := &entry{key: CursorKey(pb.Name, i, t.Schedule), pb: pb, index: i, trig: t, sched: sched, loc: loc}
	raw, err := s.opts.Store.GetCursor(ctx, e.key)
	switch {
	case errors.Is(err, state.ErrNotFound):
		// First sight: the history starts now.
		e.last = now
		if err := s.putCursor(ctx, e, now); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("get cursor %s: %w", e.key, err)
	default:
		last, perr := time.Parse(time.RFC3339Nano, string(raw))
		if perr != nil {
			return nil, fmt.Errorf("cursor %s: %w", e.key, perr)
		}
		e.last = last
	}
	if e.last.After(now) {
		// The clock is behind the recorded slot (it stepped backwards
		// across a restart): nothing was missed; wait for the first slot
		// after the recorded one.
		e.next = e.sched.Next(e.last.In(e.loc))
		return e, nil
	}
	e.next = e.sched.Next(now.In(e.loc))
	s.catchUp(e, e.last, now)
	return e, nil
}

// catchUp queues the slots in (after, now] that the trigger's catch-up
// policy fires and reports the others as dropped.
func (s *Scheduler) catchUp(e *entry, after, now time.Time) {
	missed, older := missedSlots(e.sched, e.loc, after, now, catchupWindow(e.trig.Schedule))
	if len(missed) == 0 && !older {
		return
	}
	fire := missed
	switch e.trig.Schedule.Catchup {
	case "all":
	case "latest":
		if len(missed) > 0 {
			fire = missed[len(missed)-1:]
		}
	default: // none
		fire = nil
	}
	for _, slot := range missed[:len(missed)-len(fire)] {
		s.report(e, Firing{Slot: slot, Outcome: Dropped, Catchup: true})
	}
	s.log.Info("missed schedule slots", "playbook", e.pb.Name, "trigger", e.index,
		"missed", len(missed), "firing", len(fire), "older_than_window", older, "catchup", e.trig.Schedule.Catchup)
	for _, slot := range fire {
		e.queue = append(e.queue, queued{slot: slot, catchup: true})
	}
}

func catchupWindow(sch *playbook.Schedule) time.Duration {
	if sch.CatchupWindow > 0 {
		return sch.CatchupWindow
	}
	return DefaultCatchupWindow
}

// missedSlots lists the slots in (after, now] no older than now-window, at
// most MaxCatchupSlots (the newest); older reports whether slots were left
// out (before the window or over the cap).
func missedSlots(sched cron.Schedule, loc *time.Location, after, now time.Time, window time.Duration) (slots []time.Time, older bool) {
	from := after
	if lo := now.Add(-window); from.Before(lo) {
		// Slots in (after, lo) exist if the first slot after `after` is before lo.
		if first := sched.Next(after.In(loc)); !first.IsZero() && first.Before(lo) {
			older = true
		}
		from = lo.Add(-time.Nanosecond) // Next is strictly after: include lo itself
	}
	for t := sched.Next(from.In(loc)); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		slots = append(slots, t)
		if len(slots) > MaxCatchupSlots {
			slots = slots[1:]
			older = true
		}
	}
	return slots, older
}

// NextSlots returns the next n fire times of sch after from, in the zone
// the slots are computed in (the trigger's timezone, or a CRON_TZ= prefix).
func NextSlots(sch *playbook.Schedule, from time.Time, n int) ([]time.Time, error) {
	sched, err := cronParser.Parse(sch.Cron)
	if err != nil {
		return nil, fmt.Errorf("parse cron %q: %w", sch.Cron, err)
	}
	loc := Zone(sched, sch.Location)
	out := make([]time.Time, 0, n)
	t := from.In(loc)
	for range n {
		t = sched.Next(t)
		if t.IsZero() {
			break
		}
		t = t.In(loc)
		out = append(out, t)
	}
	return out, nil
}

// Zone is the zone sched's slots are computed in: a CRON_TZ= prefix wins,
// else loc (nil: UTC). robfig's Next computes a spec without the prefix in
// the zone of the time it is given, which is why the scheduler always
// passes times in this zone.
func Zone(sched cron.Schedule, loc *time.Location) *time.Location {
	if ss, ok := sched.(*cron.SpecSchedule); ok && ss.Location != nil && ss.Location != time.Local {
		return ss.Location
	}
	if loc == nil {
		return time.UTC
	}
	return loc
}
