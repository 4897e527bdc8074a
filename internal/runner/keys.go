package runner

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Runs queued on a concurrency key. A run whose key is held by another
// run (on_busy: queue, or cancel_running once it has cancelled the
// holder) is saved waiting with state.Run.QueuedOnKey and parked like any
// waiting run (park.go): no goroutine, no slot. The runner keeps, per
// key, the runs parked on it here, oldest first, and tells its engine
// which keys have runs parked on them (engine.SetKeyQueued): a new run
// with on_busy: queue that finds runs parked on its key here parks behind
// them.
//
// When the key may have become free — this process's engine released it
// (engine.Released), another replica or process did (state.NoticeKeyFreed,
// sent by the database whoever deletes the lock), a run parked on it (a
// release may have come between its try and its parking), the server
// became ready, or every KeyPoll (a release nothing told of) — one
// goroutine takes the key in the name of the oldest run parked on it
// (AcquireLock with the run as owner) and wakes that run: it is launched
// through the normal path and queues for a slot, holding the key already,
// so that no run launched later takes it first. A key still held wakes
// nothing, so a run never spins on it.
//
// Fairness is first-in-first-out among the runs queued in one process.
// Replicas each keep their own queue; a release wakes the oldest run of
// each, and the first to take the key has it: the others stay parked.

// keyPark is the runner's index of the runs parked on each key.
type keyPark struct {
	waiting map[string][]keyWaiter // key -> runs parked on it, oldest first (runner.mu)
	dirty   map[string]bool        // keys to try to hand over (runner.mu)
	kick    chan struct{}
	once    sync.Once
}

type keyWaiter struct {
	id      string
	created time.Time
}

// staleKeyAfter is how long a key may stay held by a run that ended (or
// was deleted) before the runs queued on it release it: a release lost
// with its process. A run releases its key as soon as it ends.
const staleKeyAfter = time.Minute

// keyParkLocked queues run id (created at created) on key and has the
// key tried: a release may have come before the run was parked. r.mu is
// held.
func (r *Host) keyParkLocked(key, id string, created time.Time) {
	kp := &r.keys
	if kp.waiting == nil {
		kp.waiting, kp.dirty = map[string][]keyWaiter{}, map[string]bool{}
	}
	q := kp.waiting[key]
	if len(q) == 0 {
		r.eng.SetKeyQueued(key, true)
	}
	i := len(q)
	for i > 0 && before(created, id, q[i-1]) {
		i--
	}
	kp.waiting[key] = slices.Insert(q, i, keyWaiter{id: id, created: created})
	r.keyDirtyLocked(key)
}

// before reports whether the run (created, id) was created before w.
func before(created time.Time, id string, w keyWaiter) bool {
	if c := created.Compare(w.created); c != 0 {
		return c < 0
	}
	return id < w.id
}

// keyUnparkLocked takes run id out of key's queue. r.mu is held.
func (r *Host) keyUnparkLocked(key, id string) {
	q := r.keys.waiting[key]
	if i := slices.IndexFunc(q, func(w keyWaiter) bool { return w.id == id }); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		if _, ok := r.keys.waiting[key]; ok {
			delete(r.keys.waiting, key)
			r.eng.SetKeyQueued(key, false)
		}
		return
	}
	r.keys.waiting[key] = q
}

// keyDirtyLocked notes key to try and wakes the hand-over loop, started
// on first use. r.mu is held.
func (r *Host) keyDirtyLocked(key string) {
	kp := &r.keys
	kp.once.Do(func() {
		kp.kick = make(chan struct{}, 1)
		go r.keyLoop()
	})
	kp.dirty[key] = true
	select {
	case kp.kick <- struct{}{}:
	default:
	}
}

// keyFreed has key tried, if runs are parked on it here; an empty key
// (a notice whose key was too long to carry) has every key tried.
func (r *Host) keyFreed(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == "" {
		for k := range r.keys.waiting {
			r.keyDirtyLocked(k)
		}
		return
	}
	if len(r.keys.waiting[key]) > 0 {
		r.keyDirtyLocked(key)
	}
}

// keyLoop hands keys over until the runner stops: at each kick the keys
// noted, at each release by the engine that key, and every KeyPoll every
// key with runs parked on it.
func (r *Host) keyLoop() {
	select {
	case <-r.ready: // stale locks are released and the runs parked at start known
	case <-r.base.Done():
		return
	}
	t := time.NewTicker(r.o.KeyPoll)
	defer t.Stop()
	for {
		polled := false
		select {
		case <-r.base.Done():
			return
		case <-r.keys.kick:
		case key := <-r.eng.Released():
			r.keyFreed(key)
		case <-t.C:
			polled = true
		}
		r.mu.Lock()
		var keys []string
		for k := range r.keys.dirty {
			keys = append(keys, k)
		}
		clear(r.keys.dirty)
		if polled {
			keys = keys[:0]
			for k := range r.keys.waiting {
				keys = append(keys, k)
			}
		}
		r.mu.Unlock()
		for _, k := range keys {
			r.handOver(k, polled)
		}
	}
}

// headLocked returns the oldest run parked on key (empty: none), dropping
// the runs that left the queue another way (woken, cancelled). r.mu is
// held.
func (r *Host) headLocked(key string) string {
	for {
		q := r.keys.waiting[key]
		if len(q) == 0 {
			return ""
		}
		if r.parkedOnLocked(key, q[0].id) {
			return q[0].id
		}
		r.keyUnparkLocked(key, q[0].id)
	}
}

// parkedOnLocked reports whether run id is parked on key here. r.mu is
// held.
func (r *Host) parkedOnLocked(key, id string) bool {
	a := r.active[id]
	return a.parked() && a.park.key == key
}

// handOver takes key in the name of the oldest run parked on it and
// wakes that run. A key held by a run parked on it here (handed it before
// a restart) wakes that run. With stale (the poll), a key held by a run
// that ended more than staleKeyAfter ago is released first.
func (r *Host) handOver(key string, stale bool) {
	ctx := context.WithoutCancel(r.base)
	for range 4 {
		r.mu.Lock()
		head := r.headLocked(key)
		r.mu.Unlock()
		if head == "" || r.base.Err() != nil {
			return
		}
		// Taken until the store answers (the run's key take, made here).
		var (
			ok     bool
			holder *state.Lock
		)
		err := r.eng.RetryStore(r.base, head, func() (err error) {
			ok, holder, err = r.store.AcquireLock(ctx, state.Lock{Key: key, Owner: head, Process: r.eng.Process(), Since: time.Now()})
			return err
		})
		if err != nil {
			r.log.Warn("cannot take a concurrency key for the run queued on it; trying again later", "key", key, "run_id", head, "err", err)
			return
		}
		if !ok {
			r.mu.Lock()
			theirs := r.parkedOnLocked(key, holder.Owner)
			r.mu.Unlock()
			switch {
			case theirs:
				head = holder.Owner
			case stale && r.releaseLeftBehind(ctx, key, holder.Owner):
				continue
			default:
				return // held: its release says when
			}
		}
		r.mu.Lock()
		parked := r.parkedOnLocked(key, head)
		_, owned := r.active[head]
		r.mu.Unlock()
		if parked {
			r.wakeRun(head)
			return
		}
		if !owned {
			// It ended meanwhile: the key goes to the next.
			_ = r.store.ReleaseLock(ctx, key, head)
		}
		// Else it was woken meanwhile and executes: it holds the key now
		// and releases it when it ends.
	}
}

// releaseLeftBehind releases key, held by run holder, if that run ended
// more than staleKeyAfter ago or no longer exists, and reports whether it
// did.
func (r *Host) releaseLeftBehind(ctx context.Context, key, holder string) bool {
	run, err := r.store.GetRun(ctx, holder)
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil || !run.Status.Done() || time.Since(run.EndedAt) < staleKeyAfter:
		return false
	}
	if err := r.store.ReleaseLock(ctx, key, holder); err != nil {
		return false
	}
	r.log.Warn("released a concurrency key left held by a run that ended", "key", key, "run_id", holder)
	return true
}

// letKeyGo releases the concurrency key that run, queued for a slot and
// cancelled before it got one, may hold: the key its delivery's commit
// took in its name (state.DeliveryUnit) or one handed to it as it left a
// key's queue. It never executes, so nothing else would release the key
// before the runs queued on it find it stale (staleKeyAfter). A key it
// does not hold is left alone: ReleaseLock frees only the owner's.
func (r *Host) letKeyGo(run *state.Run) {
	key := run.ConcurrencyKey
	if key == "" {
		return
	}
	err := r.store.ReleaseLock(context.WithoutCancel(r.base), key, run.ID)
	switch {
	case err == nil:
		r.keyFreed(key)
	case !errors.Is(err, state.ErrHeldByAnother):
		r.log.Error("cannot release the concurrency key of a run cancelled before it started; the runs queued on it release it once it is stale",
			"run_id", run.ID, "key", key, "err", err)
	}
}
