package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// An embedded host is the run host of one CLI process (Options.Embedded):
// `runbook run`, and `runs approve|retry` when nothing else holds the run.
// It is the same host as a server's — runs are launched into its slots,
// park, are woken by its timer, an answer or a released key, and their
// store errors are retried the same way — with these differences:
//
//   - it takes no other run: no queue of the replicas, no scheduler, no
//     notices, no watchdog. On a store shared by replicas it is a replica
//     of kind run (state.ReplicaRun) with the same lease as a server's
//     (replica.go), fenced by it the same way: no step starts once the
//     lease lapsed, the steps executing stop before another replica may
//     take the runs, and a run claimed meanwhile by another replica is
//     given up once the lease is renewed. Its runs show interrupted once
//     its lease expired, and the serve replicas take them over only when
//     their playbook says take_over: true (or the servers are configured
//     with server.take_over_run_processes);
//   - a run's start is written on its own, so a run whose process is
//     killed shows interrupted;
//   - the caller claims the run before it is launched (Execute, Continue,
//     RetryRun), so a run another process owns is refused at once, and
//     follows it to its outcome (Await);
//   - a run that stops unfinished (its write refused by the fence, or not
//     made at all) is not executed again: Await returns why.

// Open starts an embedded host: on a store shared by replicas it joins
// them (its lease, renewed until Close), and it releases the concurrency
// keys that runs of dead processes left held. Close ends it.
func (r *Host) Open(ctx context.Context) error {
	defer r.readyOnce.Do(func() { close(r.ready) })
	if r.rep != nil {
		if err := r.join(ctx); err != nil {
			return fmt.Errorf("join the replicas: %w", err)
		}
		lctx, quit := context.WithCancel(context.Background())
		done := make(chan struct{})
		r.rep.quit = func() { quit(); <-done }
		go func() {
			defer close(done)
			r.keepLease(lctx)
		}()
	}
	return r.eng.ReleaseStaleLocks(ctx)
}

// Close suspends what still executes (a run of an embedded host that is
// followed with Await has ended or parked by then) and leaves the
// replicas: its lease is renewed no more and ends now.
func (r *Host) Close() {
	if r.rep != nil && r.rep.quit != nil {
		r.rep.quit() // no renewal after the lease ended (Suspend leaves)
	}
	r.Suspend(5 * time.Second)
}

// LeaseLapsed reports whether the replica lease of an embedded host on a
// shared store lapsed (by this process's clocks) at least once since it
// joined, now included: how another replica could take its run over.
func (r *Host) LeaseLapsed() bool {
	if r.rep == nil {
		return false
	}
	r.rep.lapse.measure()
	return r.rep.lapse.everLapsed()
}

// Execute starts a new run of pb and launches it, claimed by this
// process: committed as its own (engine.StartRequest.Own), so no claim
// follows the commit (two statements fewer on a database: the run's read
// and its claim). The run is returned once committed, with the claim's
// error (a state.ErrFenced naming the process that owns it) when it could
// not be made: it is not launched then.
func (r *Host) Execute(ctx context.Context, pb *playbook.Playbook, req engine.StartRequest) (*state.Run, error) {
	req.Own = true
	run, err := r.eng.Start(ctx, pb, req)
	if err != nil {
		return nil, err
	}
	return r.claimAndLaunch(ctx, queuedRun{run: run, pb: pb, inputs: req.Inputs, fresh: true, owned: true})
}

// claimAndLaunch claims q's new run, just committed, for this process
// (unless it was committed as this process's: engine.Owns) and launches
// it; the run is returned as committed, with the claim's error when it
// could not be made (it is not launched then).
func (r *Host) claimAndLaunch(ctx context.Context, q queuedRun) (*state.Run, error) {
	committed := *q.run // the executor changes q.run from the launch on
	if !r.eng.Owns(q.run) {
		if err := r.eng.Claim(ctx, q.run.ID); err != nil {
			return &committed, err
		}
	}
	r.launchRun(q)
	return &committed, nil
}

// Continue claims the unfinished top-level run runID and launches it from
// its record, with the values given for its secret inputs.
func (r *Host) Continue(ctx context.Context, runID string, secretInputs map[string]any) error {
	if err := r.eng.Claim(ctx, runID); err != nil {
		return err
	}
	pb, run, err := r.eng.Resumable(ctx, runID)
	if err != nil {
		return err
	}
	if len(secretInputs) > 0 {
		if _, err := engine.WithSecretInputs(pb, run, secretInputs); err != nil {
			return err
		}
	}
	r.launchRun(queuedRun{run: run, pb: pb, inputs: secretInputs, owned: true})
	return nil
}

// CancelHeldByNone claims the top-level run of the unfinished run runID,
// which no process holds (a parked run of a `runbook run` that exited), and
// executes it cancelled with cause, as its holder would: its finally steps
// run and its concurrency key is released. It returns the top-level run's
// ID to follow (Await); a claim refused (another process holds the run)
// is returned as it is.
func (r *Host) CancelHeldByNone(ctx context.Context, runID string, cause error) (string, error) {
	top := r.eng.TopLevel(ctx, runID)
	r.eng.CancelNext(runID, cause)
	if err := r.Continue(ctx, top, nil); err != nil {
		r.eng.ForgetCancel(runID)
		return top, err
	}
	return top, nil
}

// RetryRun starts a retry of the failed or cancelled run runID from step
// from (see Retry), claimed by this process before it executes; the new
// run is returned with the claim's error when it could not be made.
func (r *Host) RetryRun(ctx context.Context, runID, from string, secretInputs map[string]any, by string) (*state.Run, error) {
	run, pb, inputs, err := r.prepareRetry(ctx, runID, from, secretInputs, by)
	if err != nil {
		return nil, err
	}
	return r.claimAndLaunch(ctx, queuedRun{run: run, pb: pb, inputs: inputs, fresh: true, owned: true})
}

// Await follows run runID, launched here, until it leaves this host: it
// ended, or it stopped unfinished (the error says why: its writes were
// refused or could not be made). With answers false it returns as well
// once the run parks waiting for an answer (an approval, of it or of a
// sub-playbook run), which a later `runs approve` gives; a run parked
// until a moment or a concurrency key is followed on. The run is read
// from the store when it returns.
func (r *Host) Await(ctx context.Context, runID string, answers bool) (*state.Run, error) {
	for {
		changed := r.changes()
		r.mu.Lock()
		a, held := r.active[runID]
		parked := a.parked()
		stopped := r.stopped[runID]
		r.mu.Unlock()
		if !held || parked {
			run, err := r.store.GetRun(context.WithoutCancel(ctx), runID)
			switch {
			case err != nil:
				return nil, errors.Join(stopped, err)
			case !held:
				return run, stopped
			case !answers && run.Status == state.RunWaiting && run.QueuedOnKey == "":
				// Waiting for an answer: an embedded host's engine parks
				// nothing else but a key's queue (Options.Embedded).
				return run, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// changes returns a channel closed at the next change of the runs this
// host holds (a run released, parked, or stopped).
func (r *Host) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

// changedLocked closes the channel of changes. r.mu is held.
func (r *Host) changedLocked() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// awaitingLease returns a channel that gives the cause of a cancel of run
// runID asked while the run waits until this embedded host's lease is
// renewed (fenced), and a func that ends the wait. A server's runs are
// cancelled through the store instead: it returns a nil channel.
func (r *Host) awaitingLease(runID string) (<-chan error, func()) {
	if !r.o.Embedded {
		return nil, func() {}
	}
	ch := make(chan error, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asked == nil {
		r.asked = map[string]chan error{}
	}
	r.asked[runID] = ch
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.asked, runID)
	}
}

// cancelAwaitingLease gives cause to run runID if it waits until this
// embedded host's lease is renewed, and reports whether it does: its
// caller (Ctrl-C of runbook run) is not left waiting for a lease that may
// not come back; the run, which this process cannot write meanwhile,
// stays as last recorded.
func (r *Host) cancelAwaitingLease(runID string, cause error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.asked[runID]
	if !ok {
		return false
	}
	if cause == nil {
		cause = errors.New("cancelled")
	}
	select {
	case ch <- cause:
	default:
	}
	return true
}

// noteStopped records why run runID stopped unfinished, for Await: an
// embedded host's runs are followed, a server's are not (nor kept).
func (r *Host) noteStopped(runID string, err error) {
	if err == nil || !r.o.Embedded {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == nil {
		r.stopped = map[string]error{}
	}
	r.stopped[runID] = err
}
