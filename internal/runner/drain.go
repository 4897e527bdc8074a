package runner

import (
	"context"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// Draining. A host drains before its process is stopped for an upgrade
// (runbook serve: SIGUSR1 or POST /api/v1/drain): it takes no new run
// (starts are refused with ErrDraining, nothing is taken from the
// replicas' queue), lets go of every run it holds without executing it —
// parked and queued ones, and those that park or are launched later — and
// gives the runs executing a grace to end. Those still executing then
// are suspended (written so, as at a shutdown). On a store shared by
// replicas the runs it lets go lose their owner, so the other replicas
// take them at once, and the replica leaves the group once empty; a host
// alone on its store leaves them in the store, where its next process
// resumes them. The host is empty then; its process goes on answering
// (reads, approvals: an answer wakes the run wherever it is held) until
// it is stopped.

// ErrDraining refuses a run asked of a draining host.
var ErrDraining = fault.Errorf(fault.Unavailable, "this server is draining: start the run on another replica, or once it restarted")

// DrainStatus is how far a drain is.
type DrainStatus struct {
	Draining bool      // a drain began
	Since    time.Time // when
	Grace    time.Duration
	// Executing is how many runs still execute here.
	Executing int
	// LetGo counts the runs let go without executing them (parked,
	// queued), HandedOver those of them the other replicas may take now,
	// and Suspended the runs suspended when the grace ended.
	LetGo, HandedOver, Suspended int
	// Empty: nothing executes here any more.
	Empty bool
}

// drain is the state of a drain (Host.draining, under Host.mu).
type drain struct {
	since     time.Time
	grace     time.Duration
	letGo     int
	handed    int
	suspended int
	empty     bool
}

// Drain begins draining the host, with grace for the runs executing, and
// returns at once; DrainStatus follows it. A second call does nothing.
func (r *Host) Drain(grace time.Duration) {
	r.mu.Lock()
	if r.draining != nil || r.base.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.draining = &drain{since: time.Now(), grace: grace}
	ids := r.letGoLocked()
	r.mu.Unlock()
	r.log.Warn("draining: taking no new run, letting go of the parked and queued ones", "runs_let_go", len(ids), "grace", grace)
	r.handRunsOver(ids)
	go r.drainExecuting(grace) // not among r.wg: it waits for them
}

// DrainStatus returns how far the drain is.
func (r *Host) DrainStatus() DrainStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.draining
	if d == nil {
		return DrainStatus{}
	}
	return DrainStatus{Draining: true, Since: d.since, Grace: d.grace, Executing: r.slots,
		LetGo: d.letGo, HandedOver: d.handed, Suspended: d.suspended, Empty: d.empty}
}

// drainingLocked reports whether a drain began. r.mu is held.
func (r *Host) drainingLocked() bool { return r.draining != nil }

// refusal is why the host takes no new run now (nil: it does).
func (r *Host) refusal() error {
	if r.base.Err() != nil {
		return ErrShuttingDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drainingLocked() {
		return ErrDraining
	}
	return nil
}

// letGoLocked drops the runs held here that do not execute: queued for a
// slot, parked, or launched while draining. It returns their IDs. r.mu is
// held.
func (r *Host) letGoLocked() []string {
	var ids []string
	for _, q := range r.queue {
		delete(r.active, q.run.ID)
		ids = append(ids, q.run.ID)
	}
	r.queue = nil
	for id, a := range r.active {
		if a.parked() {
			r.unparkLocked(id, a)
			delete(r.active, id)
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		r.draining.letGo += len(ids)
		r.changedLocked()
	}
	return ids
}

// handRunsOver gives the runs ids, let go, to the other replicas: they have no
// owner then. Alone on its store the host leaves them there.
func (r *Host) handRunsOver(ids []string) {
	if r.rep == nil || len(ids) == 0 {
		return
	}
	var n int
	err := r.eng.RetryStore(r.base, "", func() (err error) {
		n, err = r.rep.c.LetGo(context.WithoutCancel(r.base), r.rep.id, ids)
		return err
	})
	if err != nil {
		r.log.Error("draining: cannot hand runs over; the other replicas take them once this replica left", "runs", len(ids), "err", err)
		return
	}
	r.mu.Lock()
	r.draining.handed += n
	r.mu.Unlock()
}

// drainExecuting waits for the runs executing to end, park or be queued
// (then let go), grace at most, suspends those still executing, and
// leaves the replicas.
func (r *Host) drainExecuting(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for r.executingOrLetGo() > 0 {
		select {
		case <-deadline.C:
			n := r.Running()
			r.log.Warn("draining: grace over; suspending the runs still executing", "runs", n)
			r.mu.Lock()
			r.draining.suspended = n
			r.mu.Unlock()
			r.stop(errSuspend)
			r.wg.Wait()
		case <-tick.C:
			continue
		case <-r.base.Done():
		}
		break
	}
	if r.rep != nil {
		r.leaveReplicas()
	}
	r.mu.Lock()
	r.draining.empty = true
	d := *r.draining
	r.mu.Unlock()
	r.log.Warn("drained: nothing executes here any more; stop this process", "runs_let_go", d.letGo,
		"handed_over", d.handed, "suspended", d.suspended, "took", time.Since(d.since).Round(time.Millisecond))
}

// executingOrLetGo lets go of the runs that parked or queued since, and
// returns how many still execute.
func (r *Host) executingOrLetGo() int {
	r.mu.Lock()
	ids := r.letGoLocked()
	n := r.slots
	r.mu.Unlock()
	r.handRunsOver(ids)
	return n
}
