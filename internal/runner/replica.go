package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// Several replicas of `runbook serve` on one store (state.Coordinator,
// PostgreSQL), and the `runbook run` processes on it, which are replicas
// too (kind run, embedded.go): they hold the same lease and are fenced by
// it the same way, but take no run but their own. Each replica holds a
// lease on itself, renewed every third of Options.Lease; it executes a run
// only once it owns it (ClaimRun, an update conditional on the run having
// no owner, being its own, or belonging to a replica whose lease expired),
// so two live replicas never execute one run. Unfinished runs without a
// live owner — those of a replica killed or cut off, those a shutdown
// suspended, pending ones no replica launched — are the queue: every
// replica takes from it, up to its free execution slots, every second
// (pollEvery) and whenever a notice says there is work (ClaimRuns, FOR
// UPDATE SKIP LOCKED). A taken run resumes from its record through the
// engine, as after a restart. The store's notices carry approvals and
// cancels recorded anywhere to the replica executing the run. A store
// without coordination (bbolt, held by one process) keeps the
// single-process behaviour: resumeAll at start and the watchdog.

// DefaultLease is how long a replica's lease lasts unless renewed
// (Options.Lease, config server.lease).
const DefaultLease = 10 * time.Second

// pollEvery bounds how long a run without a live owner waits for a
// replica with a free slot when no notice arrives: a second, or a fourth
// of a shorter lease.
func pollEvery(lease time.Duration) time.Duration { return min(time.Second, lease/4) }

// takeParallel is how many taken runs are read and launched at once.
const takeParallel = 16

// replica is a runner's part in a group of replicas.
type replica struct {
	c     state.Coordinator
	id    string // this process (engine Options.Process)
	kind  state.ReplicaKind
	lease time.Duration
	kick  chan struct{} // work to take
	// listening is closed once the first Listen listens: a replica takes
	// runs only then, so that no answer to a run it takes goes unheard.
	listening chan struct{}
	listened  sync.Once
	renew     func(context.Context) error
	lapse     lapse              // the lease measured here (keepLease)
	quit      context.CancelFunc // ends the replica's loops (leaveReplicas)
}

// coordinate makes r a replica when its store is shared (state.Coordinator):
// a serve replica, or a run replica when embedded.
func (r *Host) coordinate(lease time.Duration) {
	c, ok := r.store.(state.Coordinator)
	if !ok {
		return
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	kind := state.ReplicaServe
	if r.o.Embedded {
		kind = state.ReplicaRun
	}
	rep := &replica{c: c, id: r.eng.Process(), kind: kind, lease: lease, kick: make(chan struct{}, 1), listening: make(chan struct{})}
	rep.renew = func(ctx context.Context) error { return c.KeepReplica(ctx, rep.id, kind, lease+leaseGrace(lease)) }
	rep.lapse.hold = r.eng.SetLease // the engine measures it before each step (lapse.go)
	r.rep = rep
}

// join registers this replica (its lease) before it serves; its runs are
// taken from the queue once the replica loop runs.
func (r *Host) join(ctx context.Context) error {
	sent := time.Now()
	if err := r.rep.renew(ctx); err != nil {
		return err
	}
	r.rep.lapse.renewed(sent)
	r.log.Info("joined the replicas", "replica", r.rep.id, "kind", r.rep.kind, "lease", r.rep.lease)
	return nil
}

// leave ends this replica's lease after its runs were suspended, so the
// other replicas take them at once instead of after the lease.
func (r *Host) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.rep.c.DropReplica(ctx, r.rep.id); err != nil {
		r.log.Warn("cannot end the replica lease; the other replicas take its runs when it expires", "err", err)
	}
}

// leaveReplicas ends this replica's part in the group once it drained:
// its lease is not renewed any more and ends now, it takes no run, hears
// no notice and leads no scheduler; the others take whatever it still
// owns at once.
func (r *Host) leaveReplicas() {
	r.mu.Lock()
	quit := r.rep.quit
	r.mu.Unlock()
	if quit != nil {
		quit()
	}
	r.leave()
}

// replicate keeps the lease, listens for notices and takes runs from the
// queue until ctx ends.
func (r *Host) replicate(ctx context.Context) {
	go r.keepLease(ctx)
	go r.listen(ctx)
	// Runs are taken once notices are heard (an approval answered while
	// a taken run is being resumed would be missed otherwise), or after a
	// lease without a listener: polling then, as after a broken one.
	select {
	case <-r.rep.listening:
	case <-time.After(r.rep.lease):
		r.log.Warn("not listening for the other replicas' notices yet; taking runs anyway")
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(pollEvery(r.rep.lease))
	defer t.Stop()
	for {
		r.takeRuns(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.rep.kick:
		}
	}
}

// keepLease renews the lease every third of it (a renewal that failed
// a twelfth of it later), and fences this replica by time: the database
// ends the lease a lease and a half (the lease and its grace) after it
// received the last renewal, so no sooner than that after this process
// sent it, and other replicas may take its runs from then on. Measured on
// this process's monotonic clock from that send, three quarters of a
// lease after it (leaseValid), whether its renewals fail
// or hang, this replica holds: it takes no run, leads no scheduler and
// starts no step (see lapse). It stops the steps executing a margin
// before another replica could take its runs, and takes everything up
// again once a renewal succeeds (see leaseHeld, leaseStopped and rejoined).
func (r *Host) keepLease(ctx context.Context) {
	rep := r.rep
	stop := rep.lapse.watch(leaseValid(rep.lease), leaseGrace(rep.lease), rep.lease+leaseGrace(rep.lease), r.leaseHeld, r.leaseStopped, r.rejoined)
	defer stop()
	t := time.NewTicker(rep.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, leaseValid(rep.lease)) // of no use after that
		err := rep.renew(rctx)
		cancel()
		switch {
		case err == nil:
			rep.lapse.renewed(sent)
			t.Reset(rep.lease / 3)
		case ctx.Err() != nil:
			return
		default:
			// Tried again soon: a renewal that failed on a connection
			// the database cut succeeds on the next one, well before
			// the lease lapses.
			rep.lapse.failed(sent, errors.Is(err, state.ErrNotServing))
			t.Reset(renewRetry(rep.lease))
			r.log.Warn("cannot renew the replica lease", "replica", rep.id, "err", err,
				"since_last_renewal", time.Since(rep.lapse.last()).Round(time.Millisecond))
		}
	}
}

// renewRetry is how soon a renewal that failed is tried again.
func renewRetry(lease time.Duration) time.Duration { return lease / 12 }

// leaseValid is how long after sending a renewal that succeeded this
// replica holds its lease by its own clock: the lease less a margin for
// stopping its runs and for the clocks' rates.
func leaseValid(lease time.Duration) time.Duration { return lease - lease/4 }

// leaseGrace is how long a replica whose lease lapsed (it holds: it starts
// no step and takes no run) keeps the steps executing before it stops
// them. The database keeps its lease that much longer than the lease
// (KeepReplica), so no other replica takes its runs before it stopped
// them: a dead replica's runs are taken a lease and a half after its last
// renewal, and a database that cuts every connection, or is slow to take
// new ones, for less than that stops no step.
func leaseGrace(lease time.Duration) time.Duration { return lease / 2 }

// errLeaseLapsed is the cause of runs stopped because the replica's lease
// was not renewed in time (engine.Fence).
var errLeaseLapsed = fmt.Errorf("this replica did not renew its lease in time: %w", state.ErrFenced)

// leaseHeld logs that this replica holds since its lease was last renewed
// since ago: until it is renewed it takes no run, leads no scheduler and
// starts no step; the steps executing go on.
func (r *Host) leaseHeld(since time.Duration) {
	r.log.Warn("replica lease not renewed in time: no step starts and no run is taken here until it is renewed; the steps executing go on",
		"replica", r.rep.id, "since_last_renewal", since.Round(time.Millisecond), "lease", r.rep.lease)
}

// leaseStopped stops this replica's runs without writing them (the other
// replicas may take them over once its lease expires), since its lease
// was last renewed since ago. Until the lease is renewed the runs it is
// asked to execute stop so too.
func (r *Host) leaseStopped(since time.Duration) {
	n := r.eng.Fence(errLeaseLapsed)
	r.log.Error("replica lease not renewed in time: stopped executing its runs here, without writing them; "+
		"the other replicas take them once the lease expires; this replica takes runs again once it renews its lease",
		"replica", r.rep.id, "since_last_renewal", since.Round(time.Millisecond), "lease", r.rep.lease, "runs_stopped", n)
}

// rejoined lets runs execute again once the lease was renewed after it
// lapsed; stopped says whether they had been stopped, or only held.
func (r *Host) rejoined(stopped bool) {
	if stopped {
		r.eng.Unfence()
		r.log.Warn("replica lease renewed after it lapsed: executing and taking runs again", "replica", r.rep.id)
	} else {
		r.log.Warn("replica lease renewed after it lapsed, before any other replica could take its runs: they go on", "replica", r.rep.id)
	}
	r.kickQueue()
}

// fenced handles run runID, which the engine stopped with err because
// this replica may no longer write it, and reports whether to execute it
// again, else why it stopped here. A write the store refused means
// another replica owns it: it is forgotten here. A run stopped because
// the lease lapsed waits until the lease is renewed, then is claimed
// again: it executes here again unless another replica took it
// meanwhile (then the error names it, for an embedded host's caller).
func (r *Host) fenced(runID string, err error) (bool, error) {
	if r.rep == nil || !errors.Is(err, errLeaseLapsed) {
		r.metrics.Fenced("refused")
		r.log.Warn("run stopped here: another process owns it now and goes on with it", "run_id", runID, "err", err)
		return false, err
	}
	r.metrics.Fenced("lease")
	if back := r.rep.lapse.back(); back != nil {
		asked, done := r.awaitingLease(runID)
		defer done()
		select {
		case <-back:
		case <-r.base.Done():
			return false, err
		case cause := <-asked:
			return false, fmt.Errorf("run %s cancelled (%w) while this process could not renew its lease: "+
				"it cannot write the run, which stays as last recorded", runID, cause)
		}
	}
	if r.claim(runID, false) {
		return true, nil
	}
	if r.o.Embedded {
		return r.lostTo(runID, err)
	}
	return false, err
}

// lostTo finds out, for the caller of an embedded host, who owns run
// runID, which this replica could not claim again after its lease lapsed
// (err): the fence decides, not the owner in the run's record, which a
// claim does not change. An event saying the lease came back is appended
// with this replica's fence: refused, it names the owner, and the run
// stopped here for good; accepted, the run is still this replica's and
// executes again.
func (r *Host) lostTo(runID string, err error) (bool, error) {
	ctx := state.WithFence(context.WithoutCancel(r.base), state.Fence{Owner: r.rep.id, Run: runID})
	ev := state.Event{Time: time.Now(), Type: "run.lease", Message: fmt.Sprintf(
		"the lease of replica %s lapsed and is renewed; the run is still its own and goes on", r.rep.id)}
	var fe *state.FencedError
	switch werr := r.store.AppendEvents(ctx, runID, ev); {
	case werr == nil:
		r.observe(runID, ev)
		return true, nil
	case errors.As(werr, &fe):
		return false, fmt.Errorf("%w: %w", err, fe)
	default:
		return false, errors.Join(err, werr)
	}
}

// listen handles the store's notices, listening again after a broken
// connection: the queue's polling covers the gap, and the approvals and
// cancels told meanwhile are read once it listens (reconcile.go).
func (r *Host) listen(ctx context.Context) {
	wait := 100 * time.Millisecond
	for {
		err := r.rep.c.Listen(ctx, func(n state.Notice) { r.notice(ctx, n) })
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("not listening for the other replicas' notices; polling meanwhile", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		r.kickQueue() // notices may have been missed
	}
}

func (r *Host) kickQueue() {
	select {
	case r.rep.kick <- struct{}{}:
	default:
	}
}

// notice acts on one notice: work wakes the queue; an approval wakes the
// run waiting here (or resumes it, parked, when this replica owns it); a
// cancel stops the run executing here; a released concurrency key wakes
// the oldest run parked on it here.
func (r *Host) notice(ctx context.Context, n state.Notice) {
	switch n.Kind {
	case state.NoticeListening:
		r.rep.listened.Do(func() { close(r.rep.listening) })
		r.reconcile(ctx) // what was told while not listening (reconcile.go)
		r.keyFreed("")   // keys released while not listening (keys.go)
		r.pauseNotice(ctx)
		r.kickQueue()
	case state.NoticeWork:
		r.kickQueue()
	case state.NoticeApproval:
		if r.wakeRun(r.eng.TopLevel(ctx, n.RunID)) {
			return
		}
		run, err := r.store.GetRun(ctx, n.RunID)
		if err != nil || run.Status != state.RunWaiting || run.Owner != r.rep.id || run.ParentID != "" {
			return
		}
		if pb, err := r.Parse(run.File, run.Snapshot); err == nil {
			r.launch(run, pb, nil, false)
		}
	case state.NoticeCancel:
		r.cancelNotice(ctx, n.RunID)
	case state.NoticeKeyFreed:
		r.keyFreed(n.Key) // the runs parked on it here (keys.go)
	case state.NoticePause:
		r.pauseNotice(ctx)
	case state.NoticeResume:
		if r.isParked(n.RunID) {
			if err := r.resumeParked(ctx, n.RunID); err != nil {
				r.log.Info("a resume asked through another replica does not apply", "run_id", n.RunID, "err", err)
			}
		}
	}
}

// resumeElsewhere handles an API resume of a run this replica does not
// hold (done: nothing more to do, with err the answer). A run without a
// live owner is not: this replica claims it (owned; an explicit resume
// adopts a `runbook run` process's run too) and it is launched here. A run a live
// replica owns is its to go on with: a parked one that a resume can wake
// (resumable, from the store) is woken there by a notice; one that waits
// for what a resume cannot end, or that executes there, is refused.
func (r *Host) resumeElsewhere(ctx context.Context, run *state.Run) (owned, done bool, err error) {
	if r.rep == nil || run.Owner == r.rep.id {
		return false, false, nil
	}
	ok, err := r.rep.c.ClaimRun(context.WithoutCancel(ctx), run.ID, r.rep.id, true)
	if err != nil || ok {
		return ok, err != nil, err
	}
	if run.Status != state.RunWaiting {
		return false, true, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is %s on replica %s", run.ID, run.Status, run.Owner)}
	}
	if err := r.resumable(ctx, run.ID, run.QueuedOnKey); err != nil {
		return false, true, err
	}
	if err := r.rep.c.Notify(ctx, state.Notice{Kind: state.NoticeResume, RunID: run.ID}); err != nil {
		return false, true, fmt.Errorf("resume %s on replica %s: %w", run.ID, run.Owner, err)
	}
	return false, true, r.awaitResumed(ctx, run)
}

// resumeConfirmWait bounds how long a resume asked of this replica for a
// run parked on another waits for that replica to record it.
const resumeConfirmWait = 5 * time.Second

// awaitResumed waits until run, parked on another replica and told to go
// on (a notice), has the resume on record there (state.Run.WokenEarly) or
// has gone on, so that the answer is not given for a resume a replica
// stopping meanwhile would lose. Past resumeConfirmWait it answers
// Unavailable: the notice may still be acted on (a replica slow to take
// it) or be lost (one stopping, or not listening at that moment, hears
// nothing of it later), and asking again is harmless.
func (r *Host) awaitResumed(ctx context.Context, run *state.Run) error {
	deadline := time.Now().Add(resumeConfirmWait)
	for {
		now, err := r.store.GetRun(ctx, run.ID)
		if err == nil && (now.WokenEarly || now.Status != state.RunWaiting) {
			return nil
		}
		if time.Now().After(deadline) {
			return &fault.Error{Code: fault.Unavailable, Message: fmt.Sprintf(
				"replica %s, where run %s is parked, did not record the resume within %s; it may yet go on, and asking again is harmless",
				run.Owner, run.ID, resumeConfirmWait)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cancelNotice stops run runID, recorded cancelled by another replica,
// if this replica holds it, through CancelRun with the recorded cause. An
// executing run is cancelled through the engine. A parked one is woken,
// and wakeRun, finding its record cancelled, executes it again to end it
// cancelled (its finally steps run, its concurrency key is released). A
// run between an execution and its park (or queued for a slot) starts
// cancelled at its next execution, at once. A run this replica is itself
// ending cancelled is executing: cancelling it again changes nothing.
func (r *Host) cancelNotice(ctx context.Context, runID string) {
	if held, _ := r.Holding(runID); !held {
		return
	}
	run, err := r.store.GetRun(ctx, runID)
	if err != nil {
		r.log.Error("cannot read a run cancelled on another replica", "run_id", runID, "err", err)
		return
	}
	r.CancelRun(runID, engine.RecordedCancelCause(run))
}

// isParked reports whether run runID is parked in this replica (park.go).
func (r *Host) isParked(runID string) bool {
	_, parked := r.Holding(runID)
	return parked
}

// takeRuns claims runs from the queue for the free slots and launches
// them; it returns how many.
func (r *Host) takeRuns(ctx context.Context) int {
	r.mu.Lock()
	free := r.max - r.slots - len(r.queue) - r.heldLocked(time.Now()) // see ownOnCommitLocked
	r.mu.Unlock()
	if free <= 0 || r.refusal() != nil || !r.rep.lapse.steady(r.rep.lease) {
		return 0
	}
	ids, err := r.rep.c.ClaimRuns(ctx, r.rep.id, free, r.rep.lease, r.o.TakeOverRunProcesses)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("cannot take runs from the queue", "err", err)
		}
		return 0
	}
	// Read and launched a few at a time: a dead replica's runs are
	// taken together, and each needs its record read.
	var n atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, takeParallel)
	for _, id := range ids {
		if r.retake(id) {
			continue // held here: executed, parked, or taken again (release)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if r.takeRun(ctx, id, true) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// retake reports whether run id, which this replica just took from the
// queue, is held here already. The slot is marked so that, should its
// execution let the run go (a claim refused or a write fenced by the
// owner it had a moment ago, whose lease then lapsed), release takes it
// up again: the store says it is this replica's now, and no other
// replica takes a live replica's run.
func (r *Host) retake(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.active[id]
	if a != nil {
		a.taken = true
	}
	return a != nil
}

// takeRun reads a run taken from the queue and launches it; claimed says
// that it is this replica's in the store now (ClaimRuns made it so), else
// it is claimed again before it executes.
func (r *Host) takeRun(ctx context.Context, id string, claimed bool) bool {
	// Read until the store answers: the run is this replica's now, and no
	// other takes it while this replica lives.
	var run *state.Run
	err := r.eng.RetryStore(ctx, id, func() (err error) {
		run, err = r.store.GetRun(ctx, id)
		return err
	})
	if err != nil {
		r.log.Error("cannot read a run taken from the queue", "run_id", id, "err", err)
		return false
	}
	if run.Status.Done() {
		return false // ended meanwhile: nothing to take up
	}
	if r.isPrepared(id) {
		// Committed here and not launched: its commit's answer was not
		// heard (the caller gave up on it). Launched as its caller would
		// have.
		r.log.Warn("run committed here but not launched; launching it now", "run_id", id)
		r.metrics.Recovered("taken")
		r.Launch(run)
		return true
	}
	pb, err := r.Parse(run.File, run.Snapshot)
	if err != nil {
		r.log.Error("cannot resume run: its playbook snapshot no longer loads", "run_id", id, "err", err)
		return false
	}
	r.log.Info("run taken from the queue", "run_id", id, "status", run.Status, "previous_owner", run.Owner)
	r.metrics.Recovered("taken")
	r.launchRun(queuedRun{run: run, pb: pb, owned: claimed})
	return true
}

// claim makes this replica the owner of a run about to execute; a run
// another live replica owns is left to it. Without coordination every
// run is this process's.
func (r *Host) claim(runID string, adopt bool) bool {
	if r.rep == nil {
		return true
	}
	var ok bool
	err := r.eng.RetryStore(r.base, runID, func() (err error) {
		ok, err = r.rep.c.ClaimRun(context.WithoutCancel(r.base), runID, r.rep.id, adopt)
		return err
	})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		r.log.Error("cannot claim a run; it stays in the queue", "run_id", runID, "err", err)
	case !ok:
		r.log.Info("run owned by another replica; not executed here", "run_id", runID)
	}
	return ok && err == nil
}

// leader is the scheduler's leader lease: the store's when replicas share
// it, else none (the one process fires every slot).
func (r *Host) Leader() trigger.Leader {
	if r.rep == nil {
		return nil
	}
	return lapsingLeader{r}
}

// lapsingLeader is the store's leader lease, not taken or renewed while
// the replica's own lease lapsed or it drains: the scheduler stops leading at its
// next renewal (a third of its lease) and leads again once the replica
// renewed its lease (and the leader lease is free).
type lapsingLeader struct{ r *Host }

func (l lapsingLeader) Lead(ctx context.Context, name, holder string, term int64, ttl time.Duration) (int64, error) {
	if !l.r.rep.lapse.holds() {
		return 0, fmt.Errorf("%w: this replica's own lease lapsed", trigger.ErrNotNow)
	}
	if err := l.r.refusal(); err != nil {
		return 0, fmt.Errorf("%w: %w", trigger.ErrNotNow, err)
	}
	return l.r.rep.c.Lead(ctx, name, holder, term, ttl)
}

func (l lapsingLeader) Resign(ctx context.Context, name, holder string, term int64) error {
	return l.r.rep.c.Resign(ctx, name, holder, term)
}

// releaseStaleLocks releases the concurrency locks of runs no process
// executes: at start, in a process that holds the store alone. A replica
// releases none: the locks of the others' runs are live, and a run taken
// over keeps its own (a lock is held by the run, not the process).
func (r *Host) releaseStaleLocks(ctx context.Context) error {
	if r.rep != nil {
		return nil
	}
	return r.eng.ReleaseStaleLocks(ctx)
}
