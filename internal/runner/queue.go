package runner

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Bounded execution. At most Options.MaxRunning runs execute at once in
// this process; a run launched beyond the bound waits in the runner's
// queue, first launched first started. The queue is only an index: every
// run in it is already committed (pending, or unfinished from an earlier
// process), so a crash or a shutdown loses nothing — the next start's
// resumeAll queues the unfinished runs again, oldest first.
//
// A slot is held by a run whose goroutine executes it. Under serve a run
// that waits (an approval, a long sleep, a task's next poll) is parked
// (park.go): it gives its slot back when it records run.waiting, its
// goroutine ends, and when it is due or answered it is launched again
// and queues for a slot like any run. A short sleep (under
// engine.Options.Host.ParkAfter) holds its slot.

// MaxRunningPerCPU sizes the default bound: this many runs per GOMAXPROCS.
const MaxRunningPerCPU = 64

// DefaultMaxRunning is the bound when Options.MaxRunning is 0.
func DefaultMaxRunning() int { return max(1, MaxRunningPerCPU*runtime.GOMAXPROCS(0)) }

// runSlot is what the runner knows of a run it owns.
type runSlot struct {
	playbook string
	queued   bool      // launched, waiting for a slot
	waiting  bool      // executing, waiting for an approval without a slot
	park     *parkSlot // parked, or about to be (park.go)
	taken    bool      // taken from the replicas' queue while held (retake, replica.go)
}

// queuedRun is a launch waiting for a slot.
type queuedRun struct {
	run    *state.Run
	pb     *playbook.Playbook
	inputs map[string]any
	fresh  bool
	adopt  bool // an explicit resume: taken over from any owner but a live replica
	owned  bool // taken from the replicas' queue, or committed as this replica's: claimed already (replica.go)
	// committedOwned: committed as this replica's (Host.Prepare); the
	// store kept its status from the commit (state.ClaimReadsStatus).
	committedOwned bool
	// cancelled: a run that was parked here, recorded cancelled by another
	// replica, executed to end it cancelled (its finally steps run): its
	// record saying cancelled when it gets its slot is why it executes,
	// not a cancel before it started.
	cancelled bool
}

// admitLocked starts q if a slot is free, or queues it. r.mu is held.
func (r *Host) admitLocked(q queuedRun) {
	if r.slots < r.max && len(r.queue) == 0 {
		r.goLocked(q, false)
		return
	}
	r.active[q.run.ID].queued = true
	r.queue = append(r.queue, q)
}

// goLocked executes q in a new goroutine holding a slot. r.mu is held.
func (r *Host) goLocked(q queuedRun, wasQueued bool) {
	r.slots++
	r.wg.Go(func() {
		defer r.release(q.run.ID)
		if !q.owned && !r.claim(q.run.ID, q.adopt) {
			if cause := r.eng.ForgetCancel(q.run.ID); cause != nil {
				r.recordCancel(q.run.ID, cause) // another replica has it now
			}
			return
		}
		if wasQueued && !q.cancelled && r.cancelledWhileQueued(q.run.ID, !q.owned || q.committedOwned) {
			r.eng.ForgetCancel(q.run.ID) // ended, as the cancel wants
			r.letKeyGo(q.run)
			return
		}
		r.execute(q.run, q.pb, q.inputs, q.fresh)
	})
}

// cancelledWhileQueued reports whether a queued run ended (was
// cancelled) before it got its slot: its status is read again, alone
// where the store can (state.StatusReader), or taken from the claim just
// made, or the commit that claimed it (claimed), where the store kept it
// (state.ClaimReadsStatus).
func (r *Host) cancelledWhileQueued(runID string, claimed bool) bool {
	if claimed && r.rep != nil {
		if cs, ok := r.rep.c.(state.ClaimReadsStatus); ok {
			if st, ok := cs.ClaimedStatus(runID); ok {
				return st.Done()
			}
		}
	}
	ctx := context.WithoutCancel(r.base)
	if sr, ok := r.store.(state.StatusReader); ok {
		st, err := sr.RunStatuses(ctx, []string{runID})
		return err == nil && st[runID].Done()
	}
	cur, err := r.store.GetRun(ctx, runID)
	return err == nil && cur.Status.Done()
}

// release ends the execution of runID: its slot goes to the next queued
// run.
func (r *Host) release(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.active[runID]
	if a != nil && !a.waiting {
		r.slots--
	}
	if !r.parkLocked(runID, a) {
		delete(r.active, runID)
		if a != nil && a.taken && r.base.Err() == nil {
			// Taken from the queue while this execution let it go.
			r.wg.Go(func() { r.takeRun(context.WithoutCancel(r.base), runID, false) })
		}
	} else if a != nil {
		a.taken = false
	}
	r.changedLocked()
	r.dispatchLocked()
}

// dispatchLocked starts queued runs while slots are free; once the server
// is shutting down it drops the queue instead (the runs stay committed;
// the next start resumes them). r.mu is held.
func (r *Host) dispatchLocked() {
	if r.base.Err() != nil {
		for _, q := range r.queue {
			delete(r.active, q.run.ID)
		}
		r.queue = nil
		return
	}
	for r.slots < r.max && len(r.queue) > 0 {
		q := r.queue[0]
		r.queue[0] = queuedRun{}
		r.queue = r.queue[1:]
		r.active[q.run.ID].queued = false
		r.goLocked(q, true)
	}
	if len(r.queue) == 0 {
		r.queue = nil // let the backing array go
	}
}

// observeSlot gives a run's slot back while it waits for an approval and
// takes one again when it goes on (see the top of this file). The engine
// calls it from the run's goroutine for each of its events.
func (r *Host) observeSlot(runID string, ev state.Event) {
	if ev.Type != "run.waiting" && ev.Type != "run.resumed" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.active[runID]
	if a == nil || a.queued {
		return
	}
	switch {
	case ev.Type == "run.waiting" && !a.waiting:
		a.waiting = true
		r.slots--
		r.dispatchLocked()
	case ev.Type == "run.resumed" && a.waiting:
		a.waiting = false
		r.slots++
	}
}

// Cancel implements trigger.Starter (a schedule's overlap: replace): a
// queued run that never started leaves the queue and is recorded
// cancelled without having started; an executing (or parked) one is
// cancelled through the engine, and so is a queued one that had started
// (parked, then woken, it waits for a slot again): it ends cancelled when
// it gets its slot, its finally steps run, as a cancel through the API
// has it; one another replica executes, through the store (overlap.go).
func (r *Host) Cancel(runID string) {
	r.mu.Lock()
	i := slices.IndexFunc(r.queue, func(q queuedRun) bool { return q.run.ID == runID })
	if i >= 0 && r.queue[i].run.Status != state.RunPending {
		i = -1 // it started: cancelled at its next execution (CancelRun)
	}
	var queued *state.Run
	if i >= 0 {
		queued = r.queue[i].run
		r.queue = slices.Delete(r.queue, i, i+1)
		delete(r.active, runID)
	}
	r.mu.Unlock()
	if i < 0 {
		if !r.CancelRun(runID, nil) && r.rep != nil {
			r.cancelElsewhere(runID)
		}
		return
	}
	ev, err := r.recordCancelled(runID, "run cancelled", "run cancelled before it started: it waited for an execution slot")
	if err != nil {
		r.log.Error("cannot record the cancellation of a queued run", "run_id", runID, "err", err)
		return
	}
	r.letKeyGo(queued)
	if ev != nil {
		r.observe(runID, *ev)
	}
}

// recordCancel records run runID cancelled with cause: a cancel answered
// here (CancelRun noted it for the run's next execution here, CancelNext)
// for a run this host lets go without executing it again, because the
// server stops while it waits for a slot or another replica took it over.
// The cancel was answered: on record, the run does not come back
// uncancelled, and another replica executing it stops it on the notice.
func (r *Host) recordCancel(runID string, cause error) {
	msg := r.eng.CancelledMessage(cause)
	if _, err := r.recordCancelled(runID, msg, msg); err != nil && !errors.Is(err, state.ErrEndedMeanwhile) {
		r.log.Error("cannot record a cancel answered for a run this process let go", "run_id", runID, "err", err)
	}
}

// recordCancelled records run runID, which this process does not
// execute, cancelled in the store, with msg as its error and event as
// its event's message, and returns that event; nil when the run has
// ended (or cannot be read) and is left as it is.
func (r *Host) recordCancelled(runID, msg, event string) (*state.Event, error) {
	ctx := context.WithoutCancel(r.base)
	run, err := r.store.GetRun(ctx, runID)
	if err != nil || run.Status.Done() {
		return nil, nil
	}
	run.Status, run.EndedAt = state.RunCancelled, time.Now()
	run.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: msg}
	ev := state.Event{Type: "run.cancelled", Message: event}
	if err := r.store.SaveRun(ctx, run, ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// queuedCount is the number of runs waiting for a slot.
func (r *Host) Queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}
