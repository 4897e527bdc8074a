package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// writeCtx is the context of a state write made for a run whose context
// is ctx. While ctx lives the write has no deadline of its own: a store
// that is merely slow is waited for (a write abandoned by a timer left
// acknowledged runs pending under load). Once ctx ends (the run is
// cancelled, or the process suspends its runs), the write goes on for
// StateWrites at most, so the records of a cancelled run are still
// written and a shutdown is not held up for ever.
func (e *Engine) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	w := &writeContext{e: e, run: ctx, values: context.WithoutCancel(ctx)}
	return w, w.end
}

// writeContext is the context writeCtx returns. The context that ends
// StateWrites after the run's (a cancel context and a watch on the run's)
// is made by the first Done, or Err once the run's context has ended:
// a write that never waits on its context (bbolt's lone writer commits
// at once) costs none.
type writeContext struct {
	e      *Engine
	run    context.Context
	values context.Context // the run's values, without its cancellation

	once sync.Once
	made atomic.Bool // ctx and stop are set
	ctx  context.Context
	stop context.CancelFunc
}

// ended is the context of a write whose context was never made before
// its end.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (w *writeContext) make() context.Context {
	w.once.Do(func() {
		w.ctx, w.stop = w.e.watchedWriteCtx(w.values, w.run)
		w.made.Store(true)
	})
	return w.ctx
}

// end ends the write's context when the write is done.
func (w *writeContext) end() {
	w.once.Do(func() {
		w.ctx, w.stop = ended, func() {}
		w.made.Store(true)
	})
	w.stop()
}

func (w *writeContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (w *writeContext) Done() <-chan struct{}       { return w.make().Done() }

func (w *writeContext) Err() error {
	if !w.made.Load() && w.run.Err() == nil {
		return nil // it ends StateWrites after the run's context at the earliest
	}
	return w.make().Err()
}

// Value is the made context's once made, so that a context derived from
// w finds its cancellation there.
func (w *writeContext) Value(key any) any {
	if w.made.Load() {
		return w.ctx.Value(key)
	}
	return w.values.Value(key)
}

// watchedWriteCtx is a context with values' values that is cancelled
// StateWrites after run is, or by stop.
func (e *Engine) watchedWriteCtx(values, run context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(values)
	var mu sync.Mutex
	var timer *time.Timer
	stopWatch := context.AfterFunc(run, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(e.o.Limits.StateWrites, cancel)
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

// maxLazy bounds the records a run keeps unwritten.
const maxLazy = 256

// deferWrite keeps a record of a pure step for the run's next write.
func (rs *runState) deferWrite(ctx context.Context, rec *state.StepRecord, evs []state.Event) {
	rs.lazyMu.Lock()
	rs.lazy = append(rs.lazy, rec)
	rs.keepEvents(evs)
	full := len(rs.lazy) >= maxLazy
	rs.lazyMu.Unlock()
	if full {
		rs.flushLazy(ctx)
	}
}

// holdEnd keeps the end of a chained step for the run's next write, as
// deferWrite keeps a pure step's record. Unlike a pure step's, a held end
// must not wait for long: whatever comes next writes it at once (the next
// step's start, the run's end or park), or, before anything that waits,
// flushDue does.
func (rs *runState) holdEnd(ctx context.Context, rec *state.StepRecord, evs []state.Event) {
	rs.lazyMu.Lock()
	if rs.lazy == nil {
		rs.lazy = make([]*state.StepRecord, 0, 2) // and the next step's start
	}
	rs.lazy = append(rs.lazy, rec)
	rs.keepEvents(evs)
	rs.held = true
	full := len(rs.lazy) >= maxLazy
	rs.lazyMu.Unlock()
	if full {
		rs.flushLazy(ctx)
	}
}

// keepEvents adds evs, a slice the caller gives up, to the events kept
// for the run's next write. rs.lazyMu is held.
func (rs *runState) keepEvents(evs []state.Event) {
	if len(rs.lazyEvents) == 0 {
		rs.lazyEvents = evs
		return
	}
	rs.lazyEvents = append(rs.lazyEvents, evs...)
}

// write persists rec (nil: only what is deferred) after every deferred
// record, in one transaction, so the store's event order is the order the
// events happened in. A store that is unavailable is tried again until
// the write is made (storefault.go): nothing else of the step happens
// meanwhile. A write that cannot be made stops the run (notWritten).
func (rs *runState) write(ctx context.Context, rec *state.StepRecord, evs []state.Event) {
	rs.lazyMu.Lock()
	defer rs.lazyMu.Unlock()
	if rs.fenced() != nil {
		rs.lazy, rs.lazyEvents, rs.start, rs.held = nil, nil, nil, false // never written here
		return
	}
	recs := rs.lazy
	if rec != nil {
		recs = append(recs, rec)
	}
	start := rs.start
	if len(start) > 0 {
		evs = slices.Concat(start, rs.lazyEvents, evs)
	} else if len(rs.lazyEvents) > 0 {
		evs = append(rs.lazyEvents, evs...) // rs's own: given up below
	}
	rs.lazy, rs.lazyEvents, rs.start, rs.held = nil, nil, nil, false
	if len(recs) == 0 && len(start) == 0 {
		return
	}
	if len(start) > 0 {
		// The run's start goes with its first write (Options.Host.DeferStart).
		rs.runMu.Lock()
		err := rs.stored(func() error {
			wctx, stop := rs.writeCtx(ctx)
			defer stop()
			return rs.saveRunSteps(wctx, recs, start, evs[len(start):], evs)
		})
		rs.runMu.Unlock()
		if recordedCancel(err) != nil {
			return
		}
		if rs.notWritten(err) != nil {
			rs.e.o.Logger.Error("save run start and steps", "run_id", rs.run.ID, "steps", len(recs), "err", err)
			return
		}
		for _, ev := range start {
			rs.e.observe(rs.run.ID, ev)
		}
		return
	}
	err := rs.stored(func() error {
		wctx, stop := rs.writeCtx(ctx)
		defer stop()
		return rs.refused(rs.e.o.Store.SaveSteps(wctx, recs, evs...))
	})
	if rs.notWritten(err) != nil {
		rs.e.o.Logger.Error("save steps", "run_id", rs.run.ID, "steps", len(recs), "err", err)
	}
}

// flushLazy writes every deferred record now.
func (rs *runState) flushLazy(ctx context.Context) { rs.write(ctx, nil, nil) }

// holding reports whether the end of a chained step waits for the run's
// next write (holdEnd).
func (rs *runState) holding() bool {
	rs.lazyMu.Lock()
	defer rs.lazyMu.Unlock()
	return rs.held
}

// flushDue writes what must be on record before a step's process or
// call starts, or before the run waits: the run's deferred start
// (Options.Host.DeferStart) and held step ends (holdEnd), with whatever else
// waits for the run's next write. It writes nothing when neither waits.
func (rs *runState) flushDue(ctx context.Context) {
	rs.lazyMu.Lock()
	due := len(rs.start) > 0 || rs.held
	rs.lazyMu.Unlock()
	if due {
		rs.flushLazy(ctx)
	}
}
