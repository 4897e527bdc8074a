package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// ProcessLeaseTTL is how long the lease of a process that executes runs
// on a shared store without being a replica (runbook run) lasts unless
// renewed: at most this long after the process dies, its runs are shown
// interrupted, whatever host it ran on.
const ProcessLeaseTTL = 15 * time.Second

// processLease is the name of owner's lease (state.Coordinator's named
// leases).
func processLease(owner string) string { return "process/" + owner }

// processLeaseValid is how long after sending a renewal that succeeded
// the process holds its lease by its own clocks: the lease less a margin
// (a quarter, as a replica's) for the clocks' rates and a step about to
// start.
func processLeaseValid(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// ProcessLease is the lease of a process that executes runs on a shared
// store without being a replica (runbook run, and runs approve or runs
// retry continuing a run): its runs are shown interrupted once it lapses,
// and the replicas may take over those whose playbook says take_over: true
// (or all, with server.take_over_run_processes).
//
// It fences the process by time, as a replica's lease does: the database
// ends the lease ttl after it received the last renewal, so no sooner than
// ttl after the process sent it; measured from that send, on the monotonic
// clock and on the wall clock (which counts a suspended machine's sleep,
// which the monotonic clock does not), the process starts no step of its
// fenced runs (Options.Host.Fence) once processLeaseValid(ttl) passed without
// a renewal, whether its renewals fail, hang, or the process was paused
// or suspended. The steps wait. At the next renewal that succeeds after
// such a lapse — of the same term, or the lease taken again — the process
// reads who owns each of its runs before any step starts: a run another
// process (a replica) claimed meanwhile is stopped at once, as a write
// refused by its fence stops it, and the steps of the others go on.
// Renewing the lease never gives a run back: the owner in the run's row
// decides (the fence), not the lease.
type ProcessLease struct {
	e            *Engine
	c            state.Coordinator
	name, holder string
	ttl, valid   time.Duration
	cancel       context.CancelFunc
	done         chan struct{}
	stop         sync.Once

	mu     sync.Mutex
	term   int64
	sent   time.Time     // when the last renewal that succeeded was sent (monotonic and wall)
	lapsed chan struct{} // closed when the lease holds again; nil while it holds
	ever   bool          // it lapsed at least once
	ended  chan struct{} // closed by Stop: nothing waits for the lease any more
}

// KeepProcessLease keeps this process's lease on a shared store
// (state.Coordinator; on another store it does nothing), renewed every
// third of ttl, until Stop, which ends it. With Options.Host.Fence the engine's
// runs are fenced by it (see ProcessLease): call it before claiming a run
// (Claim), so the lease lives when the replicas look at the run. A
// replica of runbook serve has a lease of its own and needs none.
func (e *Engine) KeepProcessLease(ttl time.Duration) *ProcessLease {
	c, ok := e.o.Store.(state.Coordinator)
	if !ok {
		return &ProcessLease{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &ProcessLease{
		e: e, c: c, name: processLease(e.o.Process), holder: e.o.Process,
		ttl: ttl, valid: processLeaseValid(ttl), cancel: cancel,
		done: make(chan struct{}), ended: make(chan struct{}),
	}
	l.renew(ctx)
	e.fences.mu.Lock()
	e.fences.lease = l
	e.fences.mu.Unlock()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				l.renew(ctx)
			}
		}
	}()
	return l
}

// Stop ends the lease (the process exits): its runs are shown interrupted
// at once.
func (l *ProcessLease) Stop() {
	if l.c == nil {
		return
	}
	l.stop.Do(func() {
		l.cancel()
		<-l.done
		l.e.fences.mu.Lock()
		if l.e.fences.lease == l {
			l.e.fences.lease = nil
		}
		l.e.fences.mu.Unlock()
		l.mu.Lock()
		term := l.term
		close(l.ended)
		if l.lapsed != nil {
			close(l.lapsed) // nothing waits for it any more
			l.lapsed = nil
		}
		l.mu.Unlock()
		if term != 0 {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			_ = l.c.Resign(rctx, l.name, l.holder, term)
		}
	})
}

// Lapsed reports whether the lease lapsed (by this process's clocks) at
// least once since it was taken, now included.
func (l *ProcessLease) Lapsed() bool {
	if l.c == nil {
		return false
	}
	l.Lapse()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ever
}

// renew renews the lease, or takes it again once lapsed, and lets the
// steps go on after a lapse once this process still owns its runs.
func (l *ProcessLease) renew(ctx context.Context) {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, l.ttl/3) // the next renewal is due then
	defer cancel()
	l.mu.Lock()
	term := l.term
	l.mu.Unlock()
	expired := false
	if term != 0 {
		// Lead renews a lease of the same term even once it expired: ask
		// first, so that a lapse the clocks here did not see (a database
		// whose clock runs fast) is not papered over.
		found, exp, err := l.c.LeaseExpired(rctx, l.name)
		if err != nil {
			l.failed(ctx, err)
			return
		}
		expired = found && exp
	}
	t, err := l.c.Lead(rctx, l.name, l.holder, term, l.ttl)
	if err == nil && t == 0 {
		t, err = l.c.Lead(rctx, l.name, l.holder, 0, l.ttl) // the term was lost: take it again
		expired = expired || term != 0
	}
	if err == nil && t == 0 {
		err = errors.New("the lease is held by another holder")
	}
	if err != nil {
		l.failed(ctx, err)
		return
	}
	l.mu.Lock()
	l.term = t
	lapse := l.elapsed() // since the renewal before, sent
	if sent.After(l.sent) {
		l.sent = sent
	}
	if expired {
		l.lapse("the database had let it expire")
	}
	check := l.lapsed != nil
	l.mu.Unlock()
	if !check {
		return
	}
	// Back after a lapse: a replica may have claimed a run meanwhile. Its
	// row says who owns it; the steps wait until that is known.
	if err := l.e.checkOwners(rctx, lapse); err != nil {
		if ctx.Err() == nil {
			l.e.o.Logger.Warn("this process's lease is renewed, but who owns its runs cannot be read; no step starts until it can", "err", err)
		}
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed != nil && l.elapsed() < l.valid {
		close(l.lapsed)
		l.lapsed = nil
		l.e.o.Logger.Warn("this process's lease is renewed after it lapsed; its runs go on")
	}
}

// failed logs a renewal that failed, and marks the lease lapsed once it
// was not renewed in time (as the next step's start would).
func (l *ProcessLease) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	l.e.o.Logger.Warn("cannot renew this process's lease; its runs may be shown interrupted, and no step starts once it lapses", "err", err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.elapsed() >= l.valid {
		l.lapse("not renewed in time")
	}
}

// elapsed is the time since the send of the last renewal that succeeded,
// the longer of the monotonic and the wall clock's measure. l.mu is held.
func (l *ProcessLease) elapsed() time.Duration {
	now := time.Now()
	return max(now.Sub(l.sent), now.Round(0).Sub(l.sent.Round(0)))
}

// lapse marks the lease lapsed, why. l.mu is held.
func (l *ProcessLease) lapse(why string) {
	if l.lapsed != nil {
		return
	}
	l.lapsed, l.ever = make(chan struct{}), true
	l.e.o.Logger.Warn("this process's lease lapsed: no step starts until it is renewed and this process still owns its runs",
		"why", why, "since_last_renewal", l.elapsed().Round(time.Millisecond), "lease", l.ttl)
}

// Lapse implements Lease: nil while the lease holds, or once it was
// stopped (nothing waits for it any more), having checked it on this
// process's clocks.
func (l *ProcessLease) Lapse() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.ended:
		return nil
	default:
	}
	if l.lapsed == nil && l.elapsed() >= l.valid {
		l.lapse("not renewed in time")
	}
	if l.lapsed == nil {
		return nil
	}
	return l.lapsed
}

// checkOwners stops each run this engine executes that another process
// owns now. The fence decides: an event saying the lease came back is
// appended to each run with its fence, which the store refuses once
// another process (a replica) claimed the run, naming it; the owner in
// the run's record is not enough, as a claim changes only the owner the
// fence checks.
func (e *Engine) checkOwners(ctx context.Context, lapse time.Duration) error {
	e.fences.mu.Lock()
	runs := e.fences.list()
	e.fences.mu.Unlock()
	for _, f := range runs {
		if f.stopped() != nil {
			continue
		}
		ev := state.Event{Time: e.o.Clock.Now(), Type: "run.lease", Message: fmt.Sprintf(
			"the lease of process %s lapsed (not renewed for %s) and is renewed; the run is still its own and goes on", e.o.Process, lapse.Round(time.Millisecond))}
		err := e.o.Store.AppendEvents(f.onto(ctx), f.f.Run, ev)
		switch {
		case errors.Is(err, state.ErrFenced):
			f.trip(err)
		case err != nil:
			return err
		default:
			e.observe(f.f.Run, ev)
		}
	}
	return nil
}

// leaseLapsed reports whether owner, a process of another host, kept a
// process lease (KeepProcessLease) on st that has lapsed. An owner of this
// host is decided by its process (ownerGone); one without a lease (a
// replica) cannot be told.
func leaseLapsed(st state.Store, owner string) bool {
	c, ok := st.(state.Coordinator)
	if _, local := onThisHost(owner); !ok || owner == "" || local {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	found, expired, err := c.LeaseExpired(ctx, processLease(owner))
	return err == nil && found && expired
}
