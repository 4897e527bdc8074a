package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// recentSlots is how many past slots GET /api/v1/schedules shows per
// trigger, and scheduleRuns how many of a playbook's latest runs it reads
// to find theirs.
const (
	recentSlots  = 10
	scheduleRuns = 500
)

// listSchedules answers GET /api/v1/schedules: every schedule trigger of
// the loaded playbooks with its last handled slot (the scheduler's cursor
// in the store), its next fire times, and its latest slots each with the
// run it started, so that a slot without one (skipped by the overlap
// policy, dropped by the catch-up policy, missed while no server ran)
// shows.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	out := api.ScheduleList{Enabled: s.o.Schedules, Schedules: []api.Schedule{}}
	for _, pb := range s.cat.all() {
		if !visible(r, pb.Name) {
			continue
		}
		var runs []*state.Run
		var pauses []state.SchedulePause
		for i, t := range pb.Triggers {
			if t.Schedule == nil {
				continue
			}
			if runs == nil {
				var err error
				if runs, err = s.scheduledRuns(r.Context(), pb.Name); err != nil {
					writeErr(w, err)
					return
				}
				if pauses, err = s.store.SchedulePauses(r.Context(), pb.Name); err != nil {
					writeErr(w, err)
					return
				}
			}
			sc, err := s.scheduleOf(r.Context(), pb, i, t.Schedule, runs, now)
			if err != nil {
				writeErr(w, err)
				return
			}
			for _, p := range pauses {
				if p.Covers(i) {
					sc.Paused = &p
					break
				}
			}
			out.Schedules = append(out.Schedules, sc)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// scheduledRuns are the latest runs of a playbook that a schedule started.
func (s *Server) scheduledRuns(ctx context.Context, name string) ([]*state.Run, error) {
	all, err := s.store.ListRuns(ctx, state.RunFilter{Playbook: name, Limit: scheduleRuns})
	if err != nil {
		return nil, err
	}
	runs := []*state.Run{}
	for _, r := range all {
		if typ, _ := r.Trigger["type"].(string); typ == "schedule" {
			runs = append(runs, r)
		}
	}
	return runs, nil
}

func (s *Server) scheduleOf(ctx context.Context, pb *playbook.Playbook, i int, sch *playbook.Schedule, runs []*state.Run, now time.Time) (api.Schedule, error) {
	out := api.Schedule{Playbook: pb.Name, Trigger: i, Cron: sch.Cron, Timezone: sch.Timezone, Overlap: sch.Overlap,
		Catchup: sch.Catchup, Next: []string{}, Recent: []api.Slot{}}
	if sch.Jitter > 0 {
		out.Jitter = sch.Jitter.String()
	}
	next, err := nextSlots(sch, 3)
	if err == nil {
		out.Next = next
	}
	var last time.Time
	raw, err := s.store.GetCursor(ctx, trigger.CursorKey(pb.Name, i, sch))
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return out, err
	default:
		if last, err = time.Parse(time.RFC3339Nano, string(raw)); err == nil {
			out.Last = last.Format(time.RFC3339)
		}
	}
	bySlot := map[int64]*state.Run{}
	var oldest time.Time // the slot of the oldest run the schedule started
	for _, r := range runs {
		if r.Trigger["via"] == trigger.ViaRunNow {
			continue // its slot is when it was asked, not one of the schedule's
		}
		str, _ := r.Trigger["slot"].(string)
		if t, err := time.Parse(time.RFC3339, str); err == nil {
			if _, seen := bySlot[t.Unix()]; !seen { // newest first: keep the latest run of a slot
				bySlot[t.Unix()] = r
			}
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	for _, slot := range pastSlots(sch, now, recentSlots) {
		sl := api.Slot{Slot: slot.Format(time.RFC3339)}
		switch r := bySlot[slot.Unix()]; {
		case r != nil:
			sl.Run, sl.Status = r.ID, r.Status
		case s.pausedSlot(ctx, pb.Name, i, sch, slot, &sl):
		case last.IsZero() || slot.After(last):
			out.Missed++
			sl.Note = "not fired: no server fired it (one was down, or schedules are off); the catch-up policy decides at the next start"
		case !oldest.IsZero() && slot.After(oldest):
			out.Missed++
			sl.Note = "handled without a run: skipped by the overlap policy or dropped by the catch-up policy"
		default:
			sl.Note = "before the first run this schedule started"
		}
		out.Recent = append(out.Recent, sl)
	}
	return out, nil
}

// pastSlots returns the latest n slots of sch at or before now, newest
// first, looking back at most 64 days. It looks back a minute, then twice
// as far each time it finds fewer than n, so a dense schedule reads few
// slots and a sparse one few spans.
func pastSlots(sch *playbook.Schedule, now time.Time, n int) []time.Time {
	for span := time.Minute; ; span *= 2 {
		var past []time.Time
		from := now.Add(-span)
		for {
			slots, err := trigger.NextSlots(sch, from, 256)
			if err != nil || len(slots) == 0 {
				break
			}
			done := false
			for _, t := range slots {
				if t.After(now) {
					done = true
					break
				}
				past = append(past, t)
			}
			if len(past) > n {
				past = past[len(past)-n:]
			}
			if done || len(slots) < 256 {
				break
			}
			from = slots[len(slots)-1]
		}
		if len(past) >= n || span >= 64*24*time.Hour {
			for i, j := 0, len(past)-1; i < j; i, j = i+1, j-1 {
				past[i], past[j] = past[j], past[i]
			}
			return past
		}
	}
}

// pausedSlot fills sl when a pause kept slot from firing (the scheduler
// noted it, trigger.PausedSlotKey) and reports whether one did.
func (s *Server) pausedSlot(ctx context.Context, playbookName string, i int, sch *playbook.Schedule, slot time.Time, sl *api.Slot) bool {
	raw, err := s.store.DedupGet(ctx, trigger.PausedSlotKey(trigger.CursorKey(playbookName, i, sch), slot))
	if err != nil {
		return false
	}
	var note trigger.PausedSlot
	if json.Unmarshal(raw, &note) != nil {
		return false
	}
	sl.Paused = fmt.Sprintf("paused by %s: %s", note.By, note.Reason)
	sl.Note = "skipped: the schedule was paused (" + sl.Paused + "); after the resume its catch-up policy decides, and a backfill may start it"
	return true
}
