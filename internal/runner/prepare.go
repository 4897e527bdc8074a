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
}

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
			if p.owned {
				r.ownedPrepared--
			}
		}
		r.preparedOld, r.prepared, r.rotated = r.prepared, make(map[string]preparedRun, len(r.prepared)), now
	}
	owned := live && r.ownOnCommitLocked()
	if owned {
		run.Owner = r.rep.id
		r.ownedPrepared++
	}
	r.prepared[run.ID] = preparedRun{pb: req.Playbook, inputs: req.Inputs, ev: ev, owned: owned}
	r.mu.Unlock()
	return run, []state.Event{ev}, nil
}

// ownOnCommitLocked reports whether a run prepared now is committed as
// this replica's: its record names the replica its owner, so that it is
// claimed in the transaction that commits it, and Launch executes it
// without a claim of its own (a statement and a transaction fewer a run;
// docs/performance.md). That is so when the replica has an execution
// slot for it, counting the runs executing, queued and prepared as its
// own (and the queue's sweep leaves those slots to them: takeRuns), so
// that a run committed so is not left waiting in this replica's queue,
// where the other replicas could not take it; it may wait there only
// behind a run launched here meanwhile (one woken, resumed or retried).
// Otherwise the run is committed without an owner and claimed when it
// gets a slot, and the others take it if this replica has not within a
// lease (docs/ha.md, the run queue). The replica must have joined and its
// lease hold (the caller checks: lapse.live). r.mu is held.
func (r *Host) ownOnCommitLocked() bool {
	return r.rep != nil && r.slots+len(r.queue)+r.ownedPrepared < r.max && !r.drainingLocked()
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
		if p.owned {
			r.ownedPrepared--
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
