package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Pauses (state.SchedulePause) are read from the store before every tick
// that may fire a slot, so a pause recorded by any process (another
// replica, the CLI on the state directly) holds from the next slot on:
// the scheduler keeps no pause of its own. Refresh makes a running
// scheduler read them at once.
//
// A slot that comes while its trigger is paused starts no run and is not
// handled: it is reported Skipped with the pause's reason and noted in the
// store (PausedSlotKey) for the schedules listing, and the trigger's cursor
// stays at the last slot handled before the pause. When the pause is
// lifted, the slots that passed meanwhile are missed slots like those of
// a downtime: the trigger's catch-up policy (none, latest, all, within
// catchup_window) decides which fire. A slot kept from firing by a pause
// is not claimed, so a backfill may start it later.

// PausedSlotKey is the dedup key under which a slot kept from firing by a
// pause is noted, its value a PausedSlot (see CursorKey).
func PausedSlotKey(cursorKey string, slot time.Time) string {
	return "paused/" + cursorKey + "/" + slot.UTC().Format(time.RFC3339Nano)
}

// PausedSlot is what is noted of a slot a pause kept from firing.
type PausedSlot struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// Refresh makes the scheduler read the pauses now instead of at its next
// slot (a pause or a resume was just recorded).
func (s *Scheduler) Refresh() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// readPauses applies the pauses recorded in the store to the entries. A
// trigger whose pause was lifted queues the slots missed meanwhile per its
// catch-up policy. When the store cannot be read, each entry keeps the
// pause it had.
func (s *Scheduler) readPauses(ctx context.Context, now time.Time) {
	if len(s.entries) == 0 {
		return
	}
	all, err := s.opts.Store.SchedulePauses(ctx, "")
	if err != nil {
		s.log.Warn("cannot read the schedule pauses; each trigger keeps its last known state", "err", err)
		return
	}
	byBook := map[string][]state.SchedulePause{}
	for _, p := range all {
		byBook[p.Playbook] = append(byBook[p.Playbook], p)
	}
	for _, e := range s.entries {
		var p *state.SchedulePause
		for i := range byBook[e.pb.Name] {
			if byBook[e.pb.Name][i].Covers(e.index) {
				p = &byBook[e.pb.Name][i]
				break // AllTriggers sorts first: its reason wins
			}
		}
		switch {
		case e.paused != nil && p == nil:
			s.log.Info("schedule resumed", "playbook", e.pb.Name, "trigger", e.index, "last", e.last, "catchup", e.trig.Schedule.Catchup)
			s.catchUp(e, e.last, now)
		case e.paused == nil && p != nil:
			s.log.Info("schedule paused", "playbook", e.pb.Name, "trigger", e.index, "by", p.By, "reason", p.Reason)
		}
		e.paused = p
	}
}

// skipPaused reports a slot its trigger's pause keeps from firing and
// notes it in the store, without handling it.
func (s *Scheduler) skipPaused(ctx context.Context, e *entry, q queued) {
	p := e.paused
	reason := fmt.Sprintf("schedule paused by %s: %s", p.By, p.Reason)
	val, _ := json.Marshal(PausedSlot{By: p.By, Reason: p.Reason})
	key := PausedSlotKey(e.key, q.slot)
	seen, err := s.opts.Store.Dedup(ctx, key, slotClaimTTL(e))
	if err == nil && !seen {
		err = s.opts.Store.DedupSet(ctx, key, val)
	}
	if err != nil {
		s.log.Warn("paused schedule slot not noted", "playbook", e.pb.Name, "trigger", e.index, "slot", q.slot, "err", err)
	}
	s.report(e, Firing{Slot: q.slot, Outcome: Skipped, Catchup: q.catchup, Reason: reason})
}
