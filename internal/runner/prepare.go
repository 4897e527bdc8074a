package runner

import (
	"context"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// Runs prepared for a commit of the caller's (trigger.Preparer): a
// webhook delivery, a schedule's slot, an API start with an
// Idempotency-Key. Prepare validates the run and returns its record, the
// caller commits it with its claim, and Launch executes it.

// preparedRun is a prepared run's playbook, raw inputs and first event.
type preparedRun struct {
	pb     *playbook.Playbook
	inputs map[string]any
	ev     state.Event
	owned  bool // its record names this replica its owner (ownOnCommitLocked)
	held   bool // a slot is held for it (Host.held)
}

// slotHold is a slot held for a run prepared at as this replica's.
type slotHold struct {
	run string
	at  time.Time
}

// slotHoldFor bounds how long a slot is held for a run prepared as this
// replica's: far longer than a commit takes. A run prepared and never
// launched (its delivery was a duplicate, its commit failed) holds its
// slot no longer than that.
const slotHoldFor = 2 * time.Second

// preparedTTL is how long a prepared run is kept at least: far longer
// than a commit takes. A run launched later still runs (resumed from its
// record, as after a restart).
const preparedTTL = time.Minute

// Prepare implements trigger.Preparer: validate the run as Start does and
// return its record for the webhook intake to commit with the delivery;
// Launch executes it once committed.
func (r *Host) Prepare(_ context.Context, req trigger.StartRequest) (*state.Run, []state.Event, error) {
	if err := r.refusal(); err != nil {
		return nil, nil, err
	}
	run, ev, err := r.eng.Prepare(req.Playbook, engine.StartRequest{Inputs: req.Inputs, Trigger: req.Trigger, Delivery: req.Delivery})
	if err != nil {
		return nil, nil, err
	}
	live := r.rep != nil && r.rep.lapse.live()
	now := time.Now()
	r.mu.Lock()
	if now.Sub(r.rotated) >= preparedTTL {
		for _, p := range r.preparedOld {
			if p.held {
				r.held--
			}
		}
		r.preparedOld, r.prepared, r.rotated = r.prepared, make(map[string]preparedRun, len(r.prepared)), now
	}
	owned := live && r.ownOnCommitLocked(now)
	if owned {
		run.Owner = r.rep.id
		r.held++
		r.holds = append(r.holds, slotHold{run.ID, now})
	}
	r.prepared[run.ID] = preparedRun{pb: req.Playbook, inputs: req.Inputs, ev: ev, owned: owned, held: owned}
	r.mu.Unlock()
	return run, []state.Event{ev}, nil
}

// heldLocked returns how many slots are held for prepared runs, once the
// holds older than slotHoldFor are let go. r.mu is held.
func (r *Host) heldLocked(now time.Time) int {
	for len(r.holds) > 0 && now.Sub(r.holds[0].at) >= slotHoldFor {
		id := r.holds[0].run
		r.holds[0] = slotHold{}
		r.holds = r.holds[1:]
		if p, ok := r.prepared[id]; ok && p.held {
			p.held = false
			r.prepared[id] = p
			r.held--
		} else if p, ok := r.preparedOld[id]; ok && p.held {
			p.held = false
			r.preparedOld[id] = p
			r.held--
		}
	}
	if len(r.holds) == 0 {
		r.holds = nil // let the backing array go
	}
	return r.held
}

// ownOnCommitLocked reports whether a run prepared now is committed as
// this replica's: its record names the replica its owner, so that it is
// claimed in the transaction that commits it, and Launch executes it
// without a claim of its own (a statement and a transaction fewer a run;
// docs/performance.md). That is so when the replica has an execution
// slot for it, counting the runs executing, queued and prepared as its
// own for a moment (slotHoldFor; the queue's sweep leaves those slots to
// them: takeRuns), so
// that a run committed so is not left waiting in this replica's queue,
// where the other replicas could not take it; it may wait there only
// behind a run launched here meanwhile (one woken, resumed or retried).
// Otherwise the run is committed without an owner and claimed when it
// gets a slot, and the others take it if this replica has not within a
// lease (docs/ha.md, the run queue). The replica must have joined and its
// lease hold (the caller checks: lapse.live). r.mu is held.
func (r *Host) ownOnCommitLocked(now time.Time) bool {
	return r.rep != nil && r.slots+len(r.queue)+r.heldLocked(now) < r.max && !r.drainingLocked()
}

// Launch implements trigger.Preparer: execute committed runs that Prepare
// returned in the background.
func (r *Host) Launch(runs ...*state.Run) {
	for _, run := range runs {
		r.mu.Lock()
		p, ok := r.prepared[run.ID]
		if ok {
			delete(r.prepared, run.ID)
		} else if p, ok = r.preparedOld[run.ID]; ok {
			delete(r.preparedOld, run.ID)
		}
		if p.held {
			r.held--
		}
		r.mu.Unlock()
		if !ok {
			r.launchLate(run)
			continue
		}
		r.eng.Committed(run, p.ev)
		r.launchRun(queuedRun{run: run, pb: p.pb, inputs: p.inputs, fresh: true, owned: p.owned, committedOwned: p.owned})
	}
}

// launchLate resumes a committed run whose preparation was dropped: it
// runs from its record, with secret inputs masked as on any resume.
func (r *Host) launchLate(run *state.Run) {
	pb, err := r.Parse(run.File, run.Snapshot)
	if err != nil {
		r.log.Error("cannot launch run: its playbook snapshot no longer loads", "run_id", run.ID, "err", err)
		return
	}
	r.log.Warn("run launched long after it was prepared; resuming it from its record", "run_id", run.ID)
	r.launch(run, pb, nil, false)
}

// preparedCount is the number of prepared runs not launched yet.
func (r *Host) preparedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.prepared) + len(r.preparedOld)
}

// isPrepared reports whether run runID was prepared here and is neither
// launched nor dropped.
func (r *Host) isPrepared(runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, a := r.prepared[runID]
	_, b := r.preparedOld[runID]
	return a || b
}
