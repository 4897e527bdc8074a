package trigger

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
)

// tick fires every due slot and returns how long to sleep before the next
// one (at most MaxSleep; at most PollInterval while a slot is queued).
func (s *Scheduler) tick(ctx context.Context) time.Duration {
	now := s.opts.Clock.Now()
	wait := s.opts.MaxSleep
	keys := make([]string, 0, len(s.entries))
	for k := range s.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s.readPauses(ctx, now)
	var due []*entry
	for _, k := range keys {
		e := s.entries[k]
		if !e.next.IsZero() && !now.Before(e.next.Add(s.jitter(e, e.next))) {
			// The awaited slot is due. Slots that passed after it (the
			// process was suspended, the clock jumped forward) are missed
			// and follow the catch-up policy.
			slot := e.next
			e.queue = append(e.queue, queued{slot: slot})
			e.next = e.sched.Next(now.In(e.loc))
			s.catchUp(e, slot, now)
		}
		if len(e.queue) > 0 || !e.pending.IsZero() {
			due = append(due, e)
		}
	}
	// Triggers due together fire together: each one's cursor write and run
	// commit would otherwise wait for all the ones sorted before it, and
	// the store groups concurrent commits into one.
	if len(due) == 1 {
		s.work(ctx, due[0])
	} else {
		var wg sync.WaitGroup
		for _, e := range due {
			wg.Go(func() { s.work(ctx, e) })
		}
		wg.Wait()
	}
	// The wait counts from now, not from the tick's start: firing took
	// time, and sleeping the whole gap again would make the next slot late
	// by that much.
	if len(due) > 0 {
		now = s.opts.Clock.Now()
	}
	for _, k := range keys {
		e := s.entries[k]
		if !e.next.IsZero() {
			wait = min(wait, e.next.Add(s.jitter(e, e.next)).Sub(now))
		}
		if !e.pending.IsZero() {
			wait = min(wait, s.opts.PollInterval)
		}
	}
	return max(wait, 0)
}

// work starts a trigger's queued slot once its playbook is idle and fires
// its due slots. It touches only e, so triggers work concurrently.
func (s *Scheduler) work(ctx context.Context, e *entry) {
	if !e.pending.IsZero() && e.paused != nil {
		slot := e.pending
		e.pending = time.Time{}
		s.skipPaused(ctx, e, queued{slot: slot})
	}
	if !e.pending.IsZero() && len(s.active(ctx, e)) == 0 {
		slot := e.pending
		e.pending = time.Time{}
		s.start(ctx, e, queued{slot: slot})
	}
	for len(e.queue) > 0 {
		q := e.queue[0]
		e.queue = e.queue[1:]
		s.fire(ctx, e, q)
	}
}

// fire applies the overlap policy to one due slot.
func (s *Scheduler) fire(ctx context.Context, e *entry, q queued) {
	if !q.slot.After(e.last) {
		// Only after the clock stepped backwards: the slot is already
		// recorded as handled.
		s.log.Warn("schedule slot already handled", "playbook", e.pb.Name, "trigger", e.index, "slot", q.slot, "last", e.last)
		return
	}
	if e.paused != nil {
		s.skipPaused(ctx, e, q)
		return
	}
	if e.trig.Schedule.Overlap == "allow" {
		s.start(ctx, e, q) // whatever runs: no need to ask which
		return
	}
	if active := s.active(ctx, e); len(active) > 0 {
		switch e.trig.Schedule.Overlap {
		case "replace":
			for _, id := range active {
				s.opts.Starter.Cancel(id)
			}
			s.log.Info("schedule cancels active runs", "playbook", e.pb.Name, "trigger", e.index, "runs", active)
		case "queue":
			if old := e.pending; !old.IsZero() {
				// At most one queued slot: the newer one replaces it.
				s.handled(ctx, e, old)
				s.report(e, Firing{Slot: old, Outcome: Skipped})
			}
			e.pending = q.slot
			s.report(e, Firing{Slot: q.slot, Outcome: Queued, Catchup: q.catchup})
			return
		default: // skip
			s.handled(ctx, e, q.slot)
			s.report(e, Firing{Slot: q.slot, Outcome: Skipped, Catchup: q.catchup})
			return
		}
	}
	s.start(ctx, e, q)
}

// active lists the runs of e's playbook the overlap policy considers: the
// unfinished ones wherever they execute when the Starter knows them
// (Unfinisher), else those executing in this process. When they cannot
// be read, this process's are used (and the failure logged).
func (s *Scheduler) active(ctx context.Context, e *entry) []string {
	if u, ok := s.opts.Starter.(Unfinisher); ok {
		ids, err := u.Unfinished(ctx, e.pb.Name)
		if err == nil {
			return ids
		}
		s.log.Warn("cannot read the unfinished runs of the playbook; the overlap policy sees this process's only",
			"playbook", e.pb.Name, "trigger", e.index, "err", err)
	}
	return s.opts.Starter.Active(e.pb.Name)
}

// handled records slot as the trigger's last handled slot, without a run.
func (s *Scheduler) handled(ctx context.Context, e *entry, slot time.Time) {
	if s.claiming() {
		if _, err := s.claimSlot(ctx, e, slot, claimSkipped); err != nil {
			s.log.Error("schedule slot not claimed", "playbook", e.pb.Name, "trigger", e.index, "err", err)
		}
	}
	if err := s.putCursor(ctx, e, slot); err != nil {
		s.log.Error("schedule cursor not saved", "playbook", e.pb.Name, "trigger", e.index, "err", err)
	}
	e.last = slot
}

// start records the slot, then starts the run: a crash in between drops
// the slot instead of firing it twice.
// Under a Leader the slot's claim is committed with its run instead, and
// the cursor written after (schedule_lease.go).
func (s *Scheduler) start(ctx context.Context, e *entry, q queued) {
	if s.opts.Leader == nil {
		if err := s.putCursor(ctx, e, q.slot); err != nil {
			s.report(e, Firing{Slot: q.slot, Outcome: Failed, Catchup: q.catchup, Err: err})
			return
		}
		e.last = q.slot
	}
	now := s.opts.Clock.Now()
	req, err := scheduleRequest(e.pb, e.trig, e.loc, q.slot, s.opts.Clock.Now, nil)
	if err != nil {
		s.failed(ctx, e, q, req, err)
		return
	}
	runID, dup, err := s.startRun(ctx, e, q.slot, req)
	if err != nil {
		s.failed(ctx, e, q, req, err)
		return
	}
	if dup {
		if runID == claimSkipped || runID == claimFailed {
			runID = ""
		}
		s.report(e, Firing{Slot: q.slot, Outcome: Skipped, RunID: runID, Catchup: q.catchup})
		return
	}
	f := Firing{Slot: q.slot, Outcome: Started, RunID: runID, Catchup: q.catchup}
	if !q.catchup {
		f.Late = now.Sub(q.slot.Add(s.jitter(e, q.slot)))
	}
	s.report(e, f)
}

// failed reports a slot whose run could not start. When the Starter
// records such runs, the slot leaves a failed run with the reason; the
// firing names it.
func (s *Scheduler) failed(ctx context.Context, e *entry, q queued, req StartRequest, reason error) {
	if s.opts.Leader != nil && s.claimFailed(ctx, e, q) {
		return
	}
	f := Firing{Slot: q.slot, Outcome: Failed, Catchup: q.catchup, Err: fmt.Errorf("start run: %w", reason)}
	if fr, ok := s.opts.Starter.(FailRecorder); ok {
		id, err := fr.StartFailed(ctx, req, reason)
		if err != nil {
			s.log.Error("failed schedule slot not recorded as a run", "playbook", e.pb.Name, "trigger", e.index, "slot", q.slot, "err", err)
		}
		f.RunID = id
	}
	s.report(e, f)
}

// scheduleRequest is the start of a run of pb's schedule trigger t for
// slot (in the slot's zone loc), the run's trigger carrying extra too
// (who started it by hand, and how): the run sees trigger.slot, .cron and
// .late_ms, and starts with the inputs t's `inputs:` templates give over
// them. On an error the request has its trigger but no inputs.
func scheduleRequest(pb *playbook.Playbook, t *playbook.Trigger, loc *time.Location, slot time.Time, now func() time.Time, extra map[string]any) (StartRequest, error) {
	trig := map[string]any{
		"type":    "schedule",
		"slot":    slot.In(loc).Format(time.RFC3339),
		"cron":    t.Schedule.Cron,
		"late_ms": now().Sub(slot).Milliseconds(),
	}
	maps.Copy(trig, extra)
	req := StartRequest{Playbook: pb, Trigger: trig}
	if len(t.Inputs) == 0 {
		return req, nil
	}
	scope := &expr.Scope{Trigger: trig, Now: now}
	inputs := make(map[string]any, len(t.Inputs))
	for name, v := range t.Inputs {
		val, err := v.Eval(scope)
		if err != nil {
			return req, fmt.Errorf("trigger input %s: %w", name, err)
		}
		inputs[name] = val
	}
	req.Inputs = inputs
	return req, nil
}

func (s *Scheduler) putCursor(ctx context.Context, e *entry, slot time.Time) error {
	if err := s.opts.Store.PutCursor(ctx, e.key, []byte(slot.UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("put cursor %s: %w", e.key, err)
	}
	return nil
}

// jitter is the slot's delay: a hash of the seed, the trigger and the slot,
// uniform in [0, jitter).
func (s *Scheduler) jitter(e *entry, slot time.Time) time.Duration {
	j := e.trig.Schedule.Jitter
	if j <= 0 {
		return 0
	}
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], s.opts.JitterSeed)
	binary.LittleEndian.PutUint64(b[8:], uint64(slot.UnixNano()))
	h.Write(b[:])
	h.Write([]byte(e.key))
	return time.Duration(h.Sum64() % uint64(j))
}

// report counts, logs and publishes one handled slot.
func (s *Scheduler) report(e *entry, f Firing) {
	f.Playbook, f.Trigger = e.pb.Name, e.index
	s.mu.Lock()
	switch f.Outcome {
	case Started:
		s.stats.Started++
		s.stats.MaxLate = max(s.stats.MaxLate, f.Late)
	case Skipped:
		s.stats.Skipped++
	case Queued:
		s.stats.Queued++
	case Dropped:
		s.stats.Dropped++
	case Failed:
		s.stats.Failed++
	}
	s.mu.Unlock()
	attrs := []any{"playbook", f.Playbook, "trigger", f.Trigger, "slot", f.Slot, "outcome", string(f.Outcome)}
	switch {
	case f.Err != nil:
		if f.RunID != "" {
			attrs = append(attrs, "run_id", f.RunID)
		}
		s.log.Error("schedule slot failed", append(attrs, "err", f.Err)...)
	case f.Outcome == Started:
		s.log.Info("schedule slot started", append(attrs, "run_id", f.RunID, "late", f.Late, "catchup", f.Catchup)...)
	case f.Reason != "":
		s.log.Info("schedule slot "+string(f.Outcome), append(attrs, "reason", f.Reason)...)
	default:
		s.log.Info("schedule slot "+string(f.Outcome), attrs...)
	}
	if s.opts.OnFire != nil {
		s.opts.OnFire(f)
	}
}
