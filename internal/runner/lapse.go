package runner

import (
	"sync"
	"time"
)

// lapse is a replica's lease as this process measures it, in two steps.
//
// The lease lapses once no renewal succeeded for valid since the send of
// the last one that did: the replica holds from then on (holds is false):
// it takes no run, leads no scheduler and starts no step, and the steps
// executing go on, writing what they can. It stops (its runs are stopped
// without writing, onStop) once no renewal succeeded for valid since the
// later of that send plus grace (the database keeps the lease that much
// longer: see leaseGrace) and the send of the last renewal that the store
// refused as serving no one (state.ErrNotServing): while the database is
// down no other replica takes a run, and once it is back none does until
// it served for a lease (ClaimRuns) and until a lease after its own last
// failed renewal (steady), by which time a replica alive has renewed. So
// a database restart stops nothing: the steps go on, and what they did is
// written once the lease is renewed, instead of their being executed
// again. A replica cut off from a database that serves the others gets no
// such refusal and stops a margin before the others may take its runs.
//
// Time is measured since a send on the monotonic clock and on the wall
// clock, the longer of the two (elapsed): a machine suspended (a laptop
// asleep) does not advance the monotonic clock. A renewal sent once the
// database may have ended the lease (expiry after the last renewal that
// succeeded: a process stopped or suspended that long) is a lapse first,
// whichever of the renewal and the lease timer comes first when the
// process wakes: its runs stop and are claimed again, so a run another
// replica took meanwhile does not go on here.
//
// The engine measures the lease itself before each step attempt: the
// lapse sets in it (hold, engine.SetLease) when the lease lapses by these
// clocks, from the start of watch and at each renewal, so that a process
// stopped past its lease starts no step when it wakes, before the timer
// here has run. A renewal that stops the runs first (above) stops them
// before it sets the later time.
type lapse struct {
	mu      sync.Mutex
	valid   time.Duration // how long a renewal holds the lease
	grace   time.Duration // how much longer the steps go on in a lapse
	expiry  time.Duration // when the database ends the lease (the lease and its grace)
	sent    time.Time     // when the last renewal that succeeded was sent
	down    time.Time     // when the last renewal refused as serving no one was sent
	shook   time.Time     // when a renewal last failed, or the lease came back after it lapsed
	lapsed  chan struct{} // closed when the lease is renewed; nil while it holds
	stopped bool          // onStop was called in this lapse
	ever    bool          // it lapsed at least once
	timer   *time.Timer
	onLapse func(since time.Duration)
	onStop  func(since time.Duration)
	onBack  func(stopped bool)
	hold    func(until time.Time) // engine.SetLease, from watch on
}

// watch calls onLapse and onStop when the lease lapses and stops, and
// onBack at the next renewal then, until stop. They are called under
// l.mu: a lapse and a renewal do not cross.
func (l *lapse) watch(valid, grace, expiry time.Duration, onLapse, onStop func(since time.Duration), onBack func(stopped bool)) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.valid, l.grace, l.expiry, l.onLapse, l.onStop, l.onBack = valid, grace, expiry, onLapse, onStop, onBack
	l.timer = time.AfterFunc(valid-elapsed(l.sent), l.check)
	l.holdLocked()
	return func() { l.timer.Stop() }
}

// check lapses or stops the lease when it is time, else waits for the
// next time it may.
func (l *lapse) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkLocked()
}

func (l *lapse) checkLocked() {
	since := elapsed(l.sent)
	if l.lapsed == nil {
		if since < l.valid {
			l.timer.Reset(l.valid - since)
			return
		}
		l.lapsed, l.ever = make(chan struct{}), true
		l.onLapse(since)
	}
	if l.stopped {
		return
	}
	if left := l.valid - elapsed(later(l.sent.Add(l.grace), l.down)); left > 0 {
		l.timer.Reset(left)
		return
	}
	l.stopped = true
	l.onStop(since)
}

// measure checks the lease now (a pause of the process that the timer has
// not seen yet lapses or stops it at once) and returns nil while it
// holds, else a channel closed when it is renewed.
func (l *lapse) measure() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.checkLocked()
	}
	if l.lapsed == nil {
		return nil
	}
	return l.lapsed
}

// renewed records a renewal sent at sent that succeeded. One sent once
// the database may have ended the lease is a lapse first.
func (l *lapse) renewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil && elapsed(l.sent) >= l.expiry {
		l.checkLocked()
	}
	if sent.After(l.sent) {
		l.sent = sent
	}
	if l.timer != nil {
		l.holdLocked()
	}
	if l.lapsed != nil && elapsed(l.sent) < l.valid {
		l.shook = time.Now()
		l.onBack(l.stopped)
		close(l.lapsed)
		l.lapsed, l.stopped = nil, false
		l.timer.Reset(l.valid - elapsed(l.sent))
	}
}

// holdLocked sets in the engine when the lease lapses: valid after the
// send of the last renewal that succeeded. l.mu is held.
func (l *lapse) holdLocked() {
	if l.hold != nil {
		l.hold(l.sent.Add(l.valid))
	}
}

// everLapsed reports whether the lease lapsed at least once.
func (l *lapse) everLapsed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ever
}

// elapsed is the time since t on the monotonic clock or on the wall
// clock, whichever is longer.
func elapsed(t time.Time) time.Duration {
	now := time.Now()
	return max(now.Sub(t), now.Round(0).Sub(t.Round(0)))
}

// failed records a renewal sent at sent that failed; down says the store
// refused it as serving no one.
func (l *lapse) failed(sent time.Time, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shook = time.Now()
	if down && sent.After(l.down) {
		l.down = sent
	}
}

// last is when the last renewal that succeeded was sent.
func (l *lapse) last() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// back returns a channel closed when the lapsed lease is renewed, or nil
// while it holds.
func (l *lapse) back() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed == nil {
		return nil
	}
	return l.lapsed
}

// live reports whether a renewal succeeded and the lease holds, measured
// now (as before a step attempt).
func (l *lapse) live() bool {
	return !l.last().IsZero() && l.measure() == nil
}

// holds reports whether the lease holds (has not lapsed).
func (l *lapse) holds() bool { return l.back() == nil }

// steady reports whether the lease holds and no renewal failed for the
// last lease: only then may this replica take other replicas' runs. A
// database that was down or cut every replica's connections at once let
// every lease in it expire meanwhile, and the first replica back would
// otherwise take the runs of the others, alive and renewing a moment
// later, and execute their steps again; within a lease of its own last
// failure, every replica that can reach the database has renewed.
func (l *lapse) steady(lease time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lapsed == nil && time.Since(l.shook) >= lease
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
