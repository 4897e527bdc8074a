package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Concurrency keys. A run whose playbook names a key takes it before its
// steps (a lock in the store, held by the run, not the process). A key
// held by another run skips this one (on_busy: skip), cancels the holder
// (cancel_running) and queues, or queues (queue).
//
// A run that queues parks: it is saved waiting with QueuedOnKey, holding
// no goroutine, and its host (the run host, internal/runner/keys.go)
// keeps it until the key is released, then takes the key in the run's
// name (AcquireLock, oldest run first) and executes it again, already
// holding it. A wake that finds the key taken again parks the run again,
// without a write.
//
// The engine calls nothing back for this. Its host tells it which keys
// have runs parked on them there (SetKeyQueued): a new run with
// on_busy: queue parks behind them instead of taking the key. And the
// engine sends each key it releases on Released, for its host to hand
// the key to the next run.

// keyQueues is what the engine knows of its host's key queues.
type keyQueues struct {
	mu     sync.Mutex
	queued map[string]bool // keys with runs parked on them in the host
	// released receives the keys this engine releases (Released).
	released chan string
}

// releasedBuffer is how many releases Released holds for a host that has
// not received them yet; a release beyond it is not sent (the host's
// poll of its keys finds it).
const releasedBuffer = 256

// SetKeyQueued tells the engine whether runs are parked on concurrency
// key in its host (queued), waiting for it: while they are, a new run
// with on_busy: queue parks behind them instead of taking the key, so
// that they get it first, oldest first. None are, until it is told.
func (e *Engine) SetKeyQueued(key string, queued bool) {
	e.keys.mu.Lock()
	defer e.keys.mu.Unlock()
	if !queued {
		delete(e.keys.queued, key)
		return
	}
	if e.keys.queued == nil {
		e.keys.queued = map[string]bool{}
	}
	e.keys.queued[key] = true
}

// keyQueued reports whether runs are parked on key in the host.
func (e *Engine) keyQueued(key string) bool {
	e.keys.mu.Lock()
	defer e.keys.mu.Unlock()
	return e.keys.queued[key]
}

// Released receives each concurrency key this engine releases, once its
// release is made: the runs parked on it may take it. It holds up to
// releasedBuffer keys not received yet; one released beyond that is not
// sent.
func (e *Engine) Released() <-chan string { return e.keys.released }

// errParkedOnKey is what acquireConcurrency returns once the run is saved
// waiting for its key (parkOnKey).
var errParkedOnKey = errors.New("parked until its concurrency key is released")

// acquireConcurrency takes the run's concurrency key, when the playbook
// has one. A key held by another run skips this one (ErrBusy), cancels the
// holder, or is waited for, as on_busy says; release frees it. A run
// parked until the key is free returns errParkedOnKey.
func (rs *runState) acquireConcurrency(ctx context.Context) (release func(), err error) {
	c := rs.pb.Concurrency
	if c == nil || c.Key == nil {
		return func() {}, nil
	}
	rs.mu.RLock()
	kv, err := rs.eval(c.Key, rs.scope(nil))
	rs.mu.RUnlock()
	if err != nil {
		return func() {}, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("concurrency.key: %v", err)}
	}
	key := rs.e.o.Redactor.String(stringify(kv))
	if held := rs.run.ConcurrencyKey; held != "" && held != key {
		// The key recorded before is not the one the run takes now (a key
		// that reads the run's status, which differed when the run was
		// prepared, or the clock, before the run was resumed): the run
		// may hold it, so it lets it go.
		rs.e.releaseLock(ctx, held, rs.run.ID)
	}
	rs.run.ConcurrencyKey = key
	return rs.acquireOrPark(ctx, key, c.OnBusy)
}

// preparedKey returns the concurrency key of run r, prepared with inputs
// (Engine.Prepare), for its commit: a store may take the key in the
// run's name with the commit when it is free, saving the run a
// transaction (state.DeliveryUnit). It is "" when the playbook has no
// key; when the key uses more than the run's inputs (its trigger, env,
// secrets, the clock), which the run sees only once it executes; and when
// the key has runs parked on it in the host and on_busy is queue: the new
// run parks behind them (SetKeyQueued). The run evaluates its key again
// before its steps, as any run does (acquireConcurrency), and lets the
// prepared one go if they differ.
func (e *Engine) preparedKey(pb *playbook.Playbook, inputs map[string]any, r *state.Run) string {
	c := pb.Concurrency
	if c == nil || c.Key == nil {
		return ""
	}
	for _, ref := range c.Key.Refs() {
		if ref.Kind != "input" {
			return ""
		}
	}
	clockRead := false
	sc := &expr.Scope{
		Inputs: inputs,
		Run:    expr.RunInfo{ID: r.ID, Playbook: pb.Name},
		Now: func() time.Time {
			clockRead = true
			return e.o.Clock.Now()
		},
	}
	kv, err := evalDerived(e.o.Redactor, c.Key, sc)
	if err != nil || clockRead {
		return ""
	}
	key := e.o.Redactor.String(stringify(kv))
	if c.OnBusy == "queue" && e.keyQueued(key) {
		return ""
	}
	return key
}

// lock is the run's claim on key.
func (rs *runState) lock(key string) state.Lock {
	return state.Lock{Key: key, Owner: rs.run.ID, Process: rs.e.o.Process, Since: rs.e.o.Clock.Now()}
}

// acquireLock tries to take key in the run's name, as long as the store
// is unavailable (stored); holder is the lock held by another run.
func (rs *runState) acquireLock(ctx context.Context, key string) (ok bool, holder *state.Lock, err error) {
	err = rs.stored(func() (err error) {
		ok, holder, err = rs.e.o.Store.AcquireLock(ctx, rs.lock(key))
		return err
	})
	return ok, holder, err
}

// acquireOrPark takes key, or parks the run until it is released. A new
// run with on_busy: queue parks without trying while older runs are
// parked on the key in the host (SetKeyQueued): they get it first. A run
// already queued on the key (woken, or taken over by another replica)
// tries at once: it is woken holding the key, taken in its name.
func (rs *runState) acquireOrPark(ctx context.Context, key, onBusy string) (func(), error) {
	e, r := rs.e, rs.run
	nop := func() {}
	queued := r.QueuedOnKey == key
	if ctx.Err() != nil { // its deadline passed while it was parked
		r.QueuedOnKey = ""
		return nop, context.Cause(ctx)
	}
	if onBusy == "queue" && r.Status == state.RunPending && e.keyQueued(key) {
		return nop, rs.parkOnKey(ctx, key, "")
	}
	ok, holder, err := rs.acquireLock(ctx, key)
	if err != nil {
		r.QueuedOnKey = ""
		return nop, fmt.Errorf("acquire concurrency key %q: %w", key, err)
	}
	if ok {
		r.QueuedOnKey = ""
		return func() {
			if rs.endFreedKey(key) {
				e.lockFreed(key)
				return
			}
			e.releaseLock(ctx, key, r.ID)
		}, nil
	}
	switch onBusy {
	case "skip":
		return nop, fmt.Errorf("%w: %q is held by run %s", ErrBusy, key, holder.Owner)
	case "cancel_running":
		if !queued { // once, when it comes: not at each wake
			e.cancelHolder(ctx, key, holder.Owner, fmt.Errorf("cancelled by run %s sharing concurrency key %q", r.ID, key))
		}
	}
	return nop, rs.parkOnKey(ctx, key, holder.Owner)
}

// parkOnKey saves the run waiting until key, held by run holder (empty:
// by another run, with older runs queued on it), is released, and
// returns errParkedOnKey. A run whose record says so already (a wake
// that lost the key) parks again without a write. A run cancelled
// meanwhile ends cancelled instead (its cause is returned).
func (rs *runState) parkOnKey(ctx context.Context, key, holder string) error {
	e, r := rs.e, rs.run
	if cause := e.takeCancel(r.ID); cause != nil {
		r.QueuedOnKey = ""
		return cause
	}
	if r.Status == state.RunCancelled { // recorded cancelled by another process
		r.QueuedOnKey = ""
		return RecordedCancelCause(r)
	}
	again := r.Status == state.RunWaiting && r.QueuedOnKey == key && r.Owner == e.o.Process
	r.Status, r.Owner, r.QueuedOnKey = state.RunWaiting, e.o.Process, key
	r.WakeAt, r.AnswerOnly = r.Deadline, false // its deadline still fails it
	if again {
		return errParkedOnKey
	}
	msg := fmt.Sprintf("queued on concurrency key %q held by run %s: parked until it is released", key, holder)
	if holder == "" {
		msg = fmt.Sprintf("queued on concurrency key %q behind the runs queued on it before: parked until its turn", key)
	}
	if err := rs.saveRun(ctx, state.Event{Type: "run.queued", Message: msg}); err != nil {
		return err
	}
	return errParkedOnKey
}

// cancelHolder cancels run holderID, which holds key, for a run with
// on_busy: cancel_running. A holder executing or parked in this process
// is cancelled here. Any other has its record saved cancelled, which
// reaches the process executing it: on a store shared by replicas the
// store's cancel notice does (state.NoticeCancel), and the holder ends
// cancelled there and releases the key. On a store this process holds
// alone no other process executes the holder: its key, left behind, is
// released.
func (e *Engine) cancelHolder(ctx context.Context, key, holderID string, cause error) {
	if e.Cancel(holderID, cause) {
		return
	}
	wctx, stop := e.writeCtx(ctx)
	defer stop()
	h, err := e.o.Store.GetRun(wctx, holderID)
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		e.o.Logger.Error("cannot cancel the run holding a concurrency key", "run_id", holderID, "key", key, "err", err)
		return
	case !h.Status.Done():
		h.Status, h.EndedAt = state.RunCancelled, e.o.Clock.Now()
		h.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: e.o.Redactor.String(cancelledMessage(cause))}
		ev := state.Event{Type: "run.cancelled", Message: h.Error.Message}
		if err := e.o.Store.SaveRun(wctx, h, ev); err != nil {
			e.o.Logger.Error("cannot record the cancellation of the run holding a concurrency key", "run_id", holderID, "key", key, "err", err)
			return
		}
		e.observe(holderID, ev)
	}
	if ex, ok := e.o.Store.(state.Exclusive); ok && ex.Exclusive() {
		e.releaseLock(ctx, key, holderID)
	}
}

// endFreedKey reports whether the run's last write freed key with the
// run's end: the store frees it so (state.EndFreesKey) and the write
// recorded a status that frees it.
func (rs *runState) endFreedKey(key string) bool {
	st, ok := rs.e.o.Store.(state.EndFreesKey)
	if !ok || !st.EndFreesKey() {
		return false
	}
	rs.runMu.Lock()
	defer rs.runMu.Unlock()
	return rs.settled && rs.run.Status.KeyFreed() && rs.run.ConcurrencyKey == key
}

// lockFreed sends key, which this process released, on Released: the
// runs parked on it may take it.
func (e *Engine) lockFreed(key string) {
	select {
	case e.keys.released <- key:
	default: // not received: the host's poll finds the key free
	}
}

// releaseFor bounds how long the release of a concurrency key that fails
// is tried again (the next start frees it then: ReleaseStaleLocks).
const releaseFor = time.Hour

// releaseLock frees the concurrency key that run runID holds, once the
// run's end (or suspension) is recorded. A store that is unavailable is
// tried again at once, while the run's host lives (retryStore); a release
// that still fails is logged and tried again in the background, whatever
// the error, until it succeeds, the key is no longer the run's, or
// releaseFor has passed: a run that ended never keeps its key.
func (e *Engine) releaseLock(ctx context.Context, key, runID string) {
	release := func(ctx context.Context) func() error {
		return func() error {
			wctx, stop := e.writeCtx(ctx)
			defer stop()
			return e.o.Store.ReleaseLock(wctx, key, runID)
		}
	}
	err := e.retryStore(hostOf(ctx), nil, runID, unavailable, release(ctx))
	if err == nil || errors.Is(err, state.ErrHeldByAnother) {
		// Freed, or already taken from the run once its end was recorded
		// (state.RunStatus.KeyFreed): either way the run holds it no more.
		e.lockFreed(key)
		return
	}
	e.o.Logger.Error("release concurrency key; trying again", "run_id", runID, "key", key, "err", err)
	go func() {
		bg, cancel := context.WithTimeout(context.Background(), releaseFor)
		defer cancel()
		stillHeld := func(error) bool { return e.holds(bg, key, runID) }
		if err := e.retryStore(bg, nil, runID, stillHeld, release(bg)); err != nil && e.holds(bg, key, runID) {
			e.o.Logger.Error("release concurrency key: giving up; the next start frees it", "run_id", runID, "key", key, "err", err)
			return
		}
		e.lockFreed(key)
	}()
}

// holds reports whether run runID may still hold key: it does, or the
// store could not say.
func (e *Engine) holds(ctx context.Context, key, runID string) bool {
	locks, err := e.o.Store.Locks(ctx)
	if err != nil {
		return ctx.Err() == nil
	}
	for _, l := range locks {
		if l.Key == key && l.Owner == runID {
			return true
		}
	}
	return false
}
