package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// acquireConcurrency takes the run's concurrency key, when the playbook
// has one. A key held by another run skips this one (ErrBusy), cancels the
// holder, or is waited for, as on_busy says; release frees it.
func (rs *runState) acquireConcurrency(ctx context.Context) (release func(), err error) {
	c := rs.pb.Concurrency
	nop := func() {}
	if c == nil || c.Key == nil {
		return nop, nil
	}
	rs.mu.RLock()
	kv, err := rs.eval(c.Key, rs.scope(nil))
	rs.mu.RUnlock()
	if err != nil {
		return nop, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("concurrency.key: %v", err)}
	}
	key := rs.e.o.Redactor.String(stringify(kv))
	rs.run.ConcurrencyKey = key
	st := rs.e.o.Store
	waitingLogged := false
	for {
		ok, holder, err := st.AcquireLock(ctx, state.Lock{Key: key, Owner: rs.run.ID, Process: rs.e.o.Process, Since: rs.e.o.Clock.Now()})
		if err != nil {
			return nop, fmt.Errorf("acquire concurrency key %q: %w", key, err)
		}
		if ok {
			return func() { rs.e.releaseLock(ctx, key, rs.run.ID) }, nil
		}
		switch c.OnBusy {
		case "skip":
			return nop, fmt.Errorf("%w: %q is held by run %s", ErrBusy, key, holder.Owner)
		case "cancel_running":
			rs.e.Cancel(holder.Owner, fmt.Errorf("cancelled by run %s sharing concurrency key %q", rs.run.ID, key))
		}
		if !waitingLogged {
			waitingLogged = true
			rs.event(ctx, state.Event{Type: "run.queued", Message: fmt.Sprintf("waiting for concurrency key %q held by run %s", key, holder.Owner)})
		}
		// Wait for a key released in this process, or poll (a key held
		// by another process, or released by a restart).
		freed := rs.e.lockFreedChan()
		wctx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-freed:
				stop()
			case <-wctx.Done():
			}
		}()
		_ = rs.e.o.Clock.Sleep(wctx, rs.e.o.ApprovalPoll) // an error: woken by a release, or ctx ended
		stop()
		if ctx.Err() != nil {
			return nop, context.Cause(ctx)
		}
	}
}

// lockFreedChan returns the channel closed at the next release of a
// concurrency key in this process.
func (e *Engine) lockFreedChan() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.freed == nil {
		e.freed = make(chan struct{})
	}
	return e.freed
}

// lockFreed wakes the runs queued on a concurrency key.
func (e *Engine) lockFreed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.freed != nil {
		close(e.freed)
		e.freed = nil
	}
}

// Backoff between attempts to release a concurrency key whose release
// failed.
const (
	releaseFirst = 100 * time.Millisecond
	releaseMax   = 30 * time.Second
	releaseFor   = time.Hour
)

// releaseLock frees the concurrency key that run runID holds. A release
// that fails is logged and tried again in the background, with backoff,
// until it succeeds, the key is no longer the run's, or releaseFor has
// passed (the next start frees it then: ReleaseStaleLocks): a dead run
// never keeps its key.
func (e *Engine) releaseLock(ctx context.Context, key, runID string) {
	wctx, stop := e.writeCtx(ctx)
	err := e.o.Store.ReleaseLock(wctx, key, runID)
	stop()
	if err == nil {
		e.lockFreed()
		return
	}
	e.o.Logger.Error("release concurrency key; trying again", "run_id", runID, "key", key, "err", err)
	go func() {
		wait, until := releaseFirst, time.Now().Add(releaseFor)
		for time.Now().Before(until) {
			time.Sleep(wait)
			wait = min(2*wait, releaseMax)
			bg, cancel := context.WithTimeout(context.Background(), e.o.StateWrites)
			err := e.o.Store.ReleaseLock(bg, key, runID)
			held := true
			if err != nil {
				if locks, lerr := e.o.Store.Locks(bg); lerr == nil {
					held = false
					for _, l := range locks {
						if l.Key == key && l.Owner == runID {
							held = true
						}
					}
				}
			}
			cancel()
			if err == nil || !held {
				e.lockFreed()
				return
			}
			e.o.Logger.Error("release concurrency key; trying again", "run_id", runID, "key", key, "err", err, "in", wait)
		}
	}()
}
