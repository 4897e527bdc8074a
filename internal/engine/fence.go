package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// Fencing. An engine with Options.Host.Fence executes each run on behalf of
// its owner, Options.Process: every write that moves the run forward is
// made with a state.Fence naming the run's top-level run and that owner,
// so a store shared by several replicas refuses it once another replica
// owns the run (its lease lapsed and the other claimed it). The first
// refusal stops the whole run tree at once: its context is cancelled
// with the refusal as cause, nothing more of it is written (not even the
// records of the steps the cancellation cuts short), no further step or
// cloud call starts (a mutating call is always preceded by its intent,
// a write), on_failure and finally do not run, its concurrency key stays
// held (the run holds it, and the run goes on elsewhere), and Execute or
// Resume returns an error wrapping state.ErrFenced. Fence(cause) stops
// every run this way at once, without a refusal: a replica that could not
// renew its lease in time does so, and the runs it is asked to execute
// until Unfence stop the same way before their first write.

// fence is the fencing of one top-level run and its sub-playbook runs.
type fence struct {
	f      state.Fence
	cancel context.CancelCauseFunc // the top-level run's context
	log    func(err error)

	mu   sync.Mutex
	err  error         // why the run's writes stopped; nil while they go on
	done chan struct{} // closed when err is set
	// refusal is closed when the store refused a write of the run
	// (*state.FencedError: another process owns it), not only a lapse.
	refusal chan struct{}
	refused bool
}

type fenceKey struct{}

// fencing is what the engine knows of its fences.
type fencing struct {
	mu     sync.Mutex
	runs   map[*fence]bool // of the top-level runs executing
	paused error           // set by Fence, cleared by Unfence
}

// list returns the fences of the top-level runs executing. fs.mu is held.
func (fs *fencing) list() []*fence {
	runs := make([]*fence, 0, len(fs.runs))
	for f := range fs.runs {
		runs = append(runs, f)
	}
	return runs
}

// fenceRun returns ctx, the context of run r cancelled by cancel, with
// the run's fence: the fence of the run that started r, when r is a
// sub-playbook run executed inside it, else a new one (nil without
// Options.Host.Fence). done ends the fence's registration.
func (e *Engine) fenceRun(ctx context.Context, r *state.Run, cancel context.CancelCauseFunc) (_ context.Context, _ *fence, done func()) {
	if f, ok := ctx.Value(fenceKey{}).(*fence); ok {
		return ctx, f, func() {}
	}
	if !e.o.Host.Fence {
		return ctx, nil, func() {}
	}
	f := &fence{f: state.Fence{Owner: e.o.Process, Run: r.ID}, cancel: cancel, done: make(chan struct{}), refusal: make(chan struct{})}
	f.log = func(err error) {
		var fe *state.FencedError
		if errors.As(err, &fe) {
			e.o.Logger.Error("run fenced: another process owns it now; stopped here without writing", "run_id", r.ID, "owner", fe.Owner, "err", err)
			return
		}
		e.o.Logger.Warn("run stopped here without writing", "run_id", r.ID, "err", err)
	}
	e.fences.mu.Lock()
	if e.fences.runs == nil {
		e.fences.runs = map[*fence]bool{}
	}
	e.fences.runs[f] = true
	paused := e.fences.paused
	e.fences.mu.Unlock()
	if paused != nil {
		f.trip(paused)
	}
	return context.WithValue(state.WithFence(ctx, f.f), fenceKey{}, f), f, func() {
		e.fences.mu.Lock()
		delete(e.fences.runs, f)
		e.fences.mu.Unlock()
	}
}

// trip stops the run's writes with err (the first cause stays) and
// cancels the run. It reports whether it stopped them (false: they had
// stopped already, or f is nil).
func (f *fence) trip(err error) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	first := f.err == nil
	if first {
		f.err = err
		close(f.done)
	}
	var fe *state.FencedError
	if errors.As(err, &fe) && !f.refused {
		f.refused = true
		close(f.refusal)
	}
	f.mu.Unlock()
	if first {
		f.log(err)
		f.cancel(err)
	}
	return first
}

// stopped returns why the run's writes stopped (nil: they go on).
func (f *fence) stopped() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// tripped returns a channel closed once the run's writes stopped.
func (f *fence) tripped() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.done
}

// refusedWrite returns a channel closed once the store refused a write of
// the run: another process owns it (a lapse of this process's lease does
// not close it).
func (f *fence) refusedWrite() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.refusal
}

// onto returns ctx with the run's state.Fence, for a write made from a
// context that does not derive from the run's.
func (f *fence) onto(ctx context.Context) context.Context {
	if f == nil {
		return ctx
	}
	return state.WithFence(ctx, f.f)
}

// fenced returns why the run's writes stopped (nil: they go on).
func (rs *runState) fenced() error { return rs.fence.stopped() }

// refused stops the run when err is a write its fence refused; it returns
// err.
func (rs *runState) refused(err error) error {
	if err != nil && errors.Is(err, state.ErrFenced) {
		rs.fence.trip(err)
	}
	return err
}

// lease is the lease under which the runs execute (a replica's), as its
// host renews it (SetLease).
type lease struct {
	mu    sync.Mutex
	until time.Time     // zero: none
	back  chan struct{} // closed at the next SetLease; nil until a lapse is seen
}

// SetLease tells the engine that the lease its fenced runs execute under
// (Options.Host.Fence: a replica's, internal/runner/replica.go) holds
// until until, by this process's clocks; its host calls it at each
// renewal. The engine measures the lease before each step attempt starts:
// from until on no step starts — the attempt waits until a later SetLease
// or until the run is stopped (Fence, a refused write) — and the steps
// executing go on. It is measured at the attempt, so a process stopped
// (SIGSTOP) or suspended past until starts no step when it wakes, before
// its host's own timer has run; and on the monotonic and the wall clock
// both (until keeps the monotonic reading it was computed with), so the
// sleep of a suspended machine counts. Until the first call, or with a
// zero until, no lease holds a step back.
func (e *Engine) SetLease(until time.Time) {
	e.lease.mu.Lock()
	defer e.lease.mu.Unlock()
	e.lease.until = until
	if e.lease.back != nil {
		close(e.lease.back)
		e.lease.back = nil
	}
}

// leaseLapsed measures the lease now: nil while it holds, else a channel
// closed at the next SetLease.
func (e *Engine) leaseLapsed() <-chan struct{} {
	e.lease.mu.Lock()
	defer e.lease.mu.Unlock()
	until := e.lease.until
	if now := time.Now(); until.IsZero() || now.Before(until) && now.Round(0).Before(until.Round(0)) {
		return nil
	}
	if e.lease.back == nil {
		e.lease.back = make(chan struct{})
	}
	return e.lease.back
}

// mayStart reports why no step attempt of the run may start here (nil:
// it may): its writes stopped. While the lease it executes under
// (SetLease) lapsed it waits until the lease is renewed, and the run goes
// on unless it was stopped meanwhile (another process claimed it), or ctx
// ends.
func (rs *runState) mayStart(ctx context.Context) error {
	if err := rs.fenced(); err != nil {
		return err
	}
	if rs.fence == nil {
		return nil
	}
	for {
		back := rs.e.leaseLapsed()
		if back == nil {
			break
		}
		rs.flushDue(ctx) // what ended is on record while nothing starts
		rs.e.o.Logger.Debug("step attempt held: the lease lapsed; it starts once the lease is renewed", "run_id", rs.run.ID)
		select {
		case <-back:
		case <-rs.fence.tripped():
		case <-ctx.Done():
			return nil // the run's own cancellation goes on
		}
		if err := rs.fenced(); err != nil {
			return err
		}
	}
	return rs.fenced()
}

// writeCtx is Engine.writeCtx for a write of the run, with its fence.
func (rs *runState) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, stop := rs.e.writeCtx(ctx)
	return rs.fence.onto(wctx), stop
}

// Fence stops every run this engine executes as a write refused by its
// fence does (see above), with cause, and has every run it is asked to
// execute stop so before its first write, until Unfence. A replica calls
// it when it could not renew its lease in time: another replica may take
// its runs, and they must not go on here meanwhile. cause is wrapped to
// be a state.ErrFenced if it is not one. It returns how many runs it
// stopped.
func (e *Engine) Fence(cause error) int {
	if !errors.Is(cause, state.ErrFenced) {
		cause = fmt.Errorf("%w: %w", state.ErrFenced, cause)
	}
	e.fences.mu.Lock()
	e.fences.paused = cause
	runs := e.fences.list()
	e.fences.mu.Unlock()
	n := 0
	for _, f := range runs {
		if f.trip(cause) {
			n++
		}
	}
	return n
}

// Unfence ends Fence: runs execute (and write) again.
func (e *Engine) Unfence() {
	e.fences.mu.Lock()
	e.fences.paused = nil
	e.fences.mu.Unlock()
}

// Claim makes this process the owner of the top-level run id before it
// executes it with Options.Host.Fence as a run replica (runbook run: a run it
// started, resumes, retries or continues after an approval), so that the
// fence holds from the run's first write. The claim is conditional, as an
// explicit resume's (state.Coordinator.ClaimRun with adopt): it is
// refused with a *state.FencedError naming the owner when a live replica
// owns the run (a serve replica that took it over, maybe racing this
// claim, or another runbook run executing it) or a process of this host
// that still exists does (the lease of one that is gone ends at once). A
// run that ended is left as it is (Resume says why it does not continue),
// except a cancelled one, which is resumed on purpose and made this
// process's. A sub-playbook run is executed through its top-level run
// only. Without Options.Host.Fence or a coordinator it does nothing. Join
// the replicas first (runner.Host.Open), so that the lease lives when the
// serve replicas look at the run.
func (e *Engine) Claim(ctx context.Context, id string) error {
	c, ok := e.claimer()
	if !ok {
		return nil
	}
	r, err := e.storedRun(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case r.ParentID != "":
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"run %s is a sub-playbook run of run %s, which executes it: resume that one (runbook run --resume %s)", r.ID, r.ParentID, r.ParentID)}
	case r.Owner == e.o.Process:
		return nil
	case r.Status == state.RunCancelled:
		// Not in the queue: no replica takes it; resumed on purpose.
		r.Owner = e.o.Process
		return e.o.Store.SaveRun(ctx, r)
	case r.Status.Done():
		return nil
	}
	if local, alive := e.localProcess(r.Owner); alive {
		return &state.FencedError{Run: r.ID, Owner: r.Owner}
	} else if local {
		// Its process is gone: its lease ends now, not when it expires.
		if err := c.DropReplica(ctx, r.Owner); err != nil {
			return err
		}
	}
	claimed, err := c.ClaimRun(ctx, r.ID, e.o.Process, true)
	if err != nil || claimed {
		return err
	}
	if r, err = e.storedRun(ctx, id); err != nil {
		return err
	}
	if r.Status.Done() {
		return nil
	}
	return &state.FencedError{Run: r.ID, Owner: r.Owner}
}

// claimer returns the store that Claim claims runs on, and whether it
// does: a coordinator store, with Options.Host.Fence.
func (e *Engine) claimer() (state.Coordinator, bool) {
	c, ok := e.o.Store.(state.Coordinator)
	return c, ok && e.o.Host.Fence
}

// Owns reports whether run r was committed as this process's (its Owner
// is Options.Process): a run started with StartRequest.Own, which needs
// no Claim.
func (e *Engine) Owns(r *state.Run) bool { return r.Owner != "" && r.Owner == e.o.Process }

// localProcess reports whether owner is another process of this host,
// and whether it exists (a runbook run stopped past its lease, say). The
// process of another host is left to ClaimRun, which knows the replicas'
// leases.
func (e *Engine) localProcess(owner string) (local, alive bool) {
	if owner == "" || owner == e.o.Process {
		return false, false
	}
	if _, local = onThisHost(owner); !local {
		return false, false
	}
	return true, !ownerGone(owner)
}
