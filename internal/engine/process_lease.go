package engine

import (
	"context"
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

// KeepProcessLease keeps this process's lease on a shared store
// (state.Coordinator; on another store it does nothing), renewed every
// third of ttl, until stop is called, which ends it: runs this process
// owns are shown interrupted once it lapses, on any host (Interrupted).
// A replica of runbook serve has a lease of its own and needs none.
func (e *Engine) KeepProcessLease(ttl time.Duration) (stop func()) {
	c, ok := e.o.Store.(state.Coordinator)
	if !ok {
		return func() {}
	}
	name, holder := processLease(e.o.Process), e.o.Process
	ctx, cancel := context.WithCancel(context.Background())
	var term int64
	renew := func() {
		t, err := c.Lead(ctx, name, holder, term, ttl)
		if err == nil && t == 0 && term != 0 {
			t, err = c.Lead(ctx, name, holder, 0, ttl) // it lapsed: take it again
		}
		if err != nil {
			if ctx.Err() == nil {
				e.o.Logger.Warn("cannot renew this process's lease; its runs may be shown interrupted", "err", err)
			}
			return
		}
		term = t
	}
	renew()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				renew()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if term != 0 {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			_ = c.Resign(rctx, name, holder, term)
		}
	}
}

// leaseLapsed reports whether owner, a process of another host, kept a
// process lease (KeepProcessLease) on st that has lapsed. An owner of this
// host is decided by its process (ownerGone); one without a lease (a
// replica, an earlier build) cannot be told.
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
