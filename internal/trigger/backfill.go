package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// DefaultBackfillMax is how many slots a backfill starts at most unless
// told otherwise.
const DefaultBackfillMax = 100

// Backfill starts one run per slot of a schedule trigger between two
// times, each with its slot as trigger.slot, as the scheduler would have:
// the slots its catch-up policy dropped, a pause kept from firing, or
// that came before the trigger existed. Each slot's run is committed with
// the slot's claim (SlotClaim), the one the scheduler commits its runs
// with, so a slot the scheduler fired, or an earlier backfill started, is
// not started again, whichever replica does either.
type Backfill struct {
	Store    state.Store
	Preparer Preparer
	Playbook *playbook.Playbook
	Trigger  int       // index of a schedule trigger in Playbook.Triggers
	From, To time.Time // inclusive: a slot at either end is one of them
	// Max refuses a range of more slots (0: DefaultBackfillMax).
	Max    int
	DryRun bool             // list the slots and what each would do; start nothing
	Extra  map[string]any   // added to each run's trigger (who backfilled)
	Now    func() time.Time // nil: time.Now
}

// How a schedule's run was started by hand: the value of its trigger's
// "via", beside "by" (who).
const (
	ViaRunNow   = "run now"  // RunNow: trigger.slot is the time it was asked
	ViaBackfill = "backfill" // Backfill: trigger.slot is its slot
)

// The outcomes of a backfilled slot.
const (
	BackfillStarted    = "started"     // its run was started now
	BackfillWouldStart = "would start" // dry run: it has no run
	BackfillHasRun     = "has run"     // the scheduler or a backfill started its run (Run)
	BackfillHandled    = "handled"     // the scheduler handled it without a run (Note says why)
)

// BackfilledSlot is what a backfill did with one slot.
type BackfilledSlot struct {
	Slot    time.Time
	Outcome string
	Run     string // BackfillStarted, BackfillHasRun
	Note    string // BackfillHandled: skipped by the overlap policy, or its run failed to start
}

// Run lists the trigger's slots between From and To and starts a run for
// each that has none (none with DryRun). A range of more than Max slots
// is refused (fault.Invalid) before anything starts. A slot whose run
// fails to start stops the backfill with its error; the slots before it
// are reported.
func (b Backfill) Run(ctx context.Context) ([]BackfilledSlot, error) {
	now := b.Now
	if now == nil {
		now = time.Now
	}
	if b.Trigger < 0 || b.Trigger >= len(b.Playbook.Triggers) || b.Playbook.Triggers[b.Trigger].Schedule == nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has no schedule trigger at index %d", b.Playbook.Name, b.Trigger)}
	}
	if b.To.Before(b.From) {
		return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("the range ends (%s) before it begins (%s)", b.To.Format(time.RFC3339), b.From.Format(time.RFC3339))}
	}
	if !b.To.Before(now()) {
		b.To = now() // a slot to come is the scheduler's
	}
	limit := b.Max
	if limit <= 0 {
		limit = DefaultBackfillMax
	}
	t := b.Playbook.Triggers[b.Trigger]
	sched, err := cronParser.Parse(t.Schedule.Cron)
	if err != nil {
		return nil, fmt.Errorf("parse cron %q: %w", t.Schedule.Cron, err)
	}
	loc := Zone(sched, t.Schedule.Location)
	var slots []time.Time
	for s := sched.Next(b.From.Add(-time.Nanosecond).In(loc)); !s.IsZero() && !s.After(b.To); s = sched.Next(s) {
		if len(slots) == limit {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
				"more than %d slots of %q between %s and %s; backfill a shorter range, or raise the bound (--max, \"max\")",
				limit, t.Schedule.Cron, b.From.Format(time.RFC3339), b.To.Format(time.RFC3339))}
		}
		slots = append(slots, s.In(loc))
	}
	runs, err := b.runsBySlot(ctx)
	if err != nil {
		return nil, err
	}
	key := CursorKey(b.Playbook.Name, b.Trigger, t.Schedule)
	ttl := catchupWindow(t.Schedule) + 24*time.Hour
	if age := now().Sub(b.From) + 24*time.Hour; age > ttl {
		ttl = age // the claims outlive the range: a second backfill of it finds them
	}
	out := make([]BackfilledSlot, 0, len(slots))
	for _, slot := range slots {
		bs := BackfilledSlot{Slot: slot}
		if id := runs[slot.Unix()]; id != "" {
			bs.Outcome, bs.Run = BackfillHasRun, id
			out = append(out, bs)
			continue
		}
		claim := SlotClaim(key, slot)
		if b.DryRun {
			v, err := b.Store.DedupGet(ctx, claim)
			switch {
			case errors.Is(err, state.ErrNotFound):
				bs.Outcome = BackfillWouldStart
			case err != nil:
				return out, fmt.Errorf("read the claim of slot %s: %w", slot.Format(time.RFC3339), err)
			default:
				bs.claimed(string(v))
			}
			out = append(out, bs)
			continue
		}
		req, err := scheduleRequest(b.Playbook, t, loc, slot, now, b.Extra)
		if err != nil {
			return out, fmt.Errorf("slot %s: %w", slot.Format(time.RFC3339), err)
		}
		id, dup, err := commitSlot(ctx, b.Store, b.Preparer, claim, ttl, req)
		switch {
		case err != nil:
			return out, fmt.Errorf("slot %s: %w", slot.Format(time.RFC3339), err)
		case dup:
			bs.claimed(id)
		default:
			bs.Outcome, bs.Run = BackfillStarted, id
		}
		out = append(out, bs)
	}
	return out, nil
}

// claimed sets the outcome of a slot found claimed with value v.
func (bs *BackfilledSlot) claimed(v string) {
	switch v {
	case claimSkipped:
		bs.Outcome, bs.Note = BackfillHandled, "skipped by the overlap policy"
	case claimFailed:
		bs.Outcome, bs.Note = BackfillHandled, "its run could not start"
	case "":
		bs.Outcome, bs.Note = BackfillHandled, "claimed without a run"
	default:
		bs.Outcome, bs.Run = BackfillHasRun, v
	}
}

// runsBySlot maps the slots (Unix seconds) of the trigger's runs in the
// store, whatever their age, to their run: a claim expires, a run stays.
func (b Backfill) runsBySlot(ctx context.Context) (map[int64]string, error) {
	runs, err := b.Store.ListRuns(ctx, state.RunFilter{Playbook: b.Playbook.Name})
	if err != nil {
		return nil, fmt.Errorf("list the runs of %s: %w", b.Playbook.Name, err)
	}
	cron := b.Playbook.Triggers[b.Trigger].Schedule.Cron
	out := map[int64]string{}
	for _, r := range runs {
		if r.Trigger["type"] != "schedule" || r.Trigger["cron"] != cron || r.Trigger["via"] == ViaRunNow || r.RetryOf != "" {
			continue
		}
		s, _ := r.Trigger["slot"].(string)
		if at, err := time.Parse(time.RFC3339, s); err == nil && !at.Before(b.From.Add(-time.Second)) && !at.After(b.To) {
			out[at.Unix()] = r.ID
		}
	}
	return out, nil
}

// ScheduleRequest is the start of a run of pb's schedule trigger at index
// for slot, as the scheduler would start it (trigger.slot, .cron,
// .late_ms and the inputs its trigger sets), its trigger carrying extra
// too: "run now" starts it with the time it was asked as its slot.
func ScheduleRequest(pb *playbook.Playbook, index int, slot time.Time, extra map[string]any) (StartRequest, error) {
	if index < 0 || index >= len(pb.Triggers) || pb.Triggers[index].Schedule == nil {
		return StartRequest{}, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("playbook %s has no schedule trigger at index %d", pb.Name, index)}
	}
	t := pb.Triggers[index]
	sched, err := cronParser.Parse(t.Schedule.Cron)
	if err != nil {
		return StartRequest{}, fmt.Errorf("parse cron %q: %w", t.Schedule.Cron, err)
	}
	return scheduleRequest(pb, t, Zone(sched, t.Schedule.Location), slot, func() time.Time { return slot }, extra)
}
