package engine

import (
	"context"
	"sync"
	"time"
)

// writeCtx is the context of a state write made for a run whose context
// is ctx. While ctx lives the write has no deadline of its own: a store
// that is merely slow is waited for (a write abandoned by a timer left
// acknowledged runs pending under load). Once ctx ends (the run is
// cancelled, or the process suspends its runs), the write goes on for
// StateWrites at most, so the records of a cancelled run are still
// written and a shutdown is not held up for ever.
func (e *Engine) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(e.o.StateWrites, cancel)
	})
	return wctx, func() {
		stopWatch()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
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
