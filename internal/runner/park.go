package runner

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Parked runs. The server's engine parks (engine.ApprovalParkAll): a run
// waiting on an approval, a long sleep, a cloud task's next poll, a
// parked sub-playbook run or a concurrency key held by another run
// (keys.go) is saved waiting with its wake time
// (state.Run.WakeAt) and its goroutine returns. The runner keeps such a
// run among the runs it owns (r.active: schedules' overlap, the watchdog
// and resume see it), marked parked: it holds no goroutine and no slot,
// only a small entry, and one in a timer heap when it has a wake time.
//
// A parked run goes on through the runner's normal launch path (it
// queues for a slot like any run): when its wake time comes (one
// goroutine sleeps until the earliest), when the engine asks
// (Approve: an approval of it or of one of its sub-playbook runs
// answered; CancelRun: the run then ends cancelled), and at once when it
// parks after being woken while it executed. At start, resumeAll
// parks the waiting runs again from their records instead of executing
// them; only the due ones are launched. A shutdown leaves them as they
// are stored: waiting, for the next start.

// parkSlot is what a runSlot (queue.go) knows of its run's parking.
type parkSlot struct {
	// Set by parkedRun between the engine's return and release: the run
	// and its playbook, to execute it again at once when woken meanwhile.
	run *state.Run
	pb  *playbook.Playbook
	// secrets are the values given for the run's secret inputs (its
	// record masks them), kept while it is parked: what resuming it
	// needs. A restart loses them, as it always did.
	secrets map[string]any
	// pending: the run returned parked and release has not parked it yet.
	pending bool
	// parked: no goroutine, no slot; in the heap when wake is set.
	parked bool
	wake   time.Time
	// wakeNow: woken while executing (or being parked): execute it again
	// instead of parking it.
	wakeNow bool
	// key: parked until this concurrency key is free (keys.go).
	key string
	// paused: parked because its playbook is paused (pause.go), with the
	// playbook's labels.
	paused bool
	labels map[string]string
}

// parked reports whether slot a (nil: a run the runner does not own) is
// parked: no goroutine, no slot.
func (a *runSlot) parked() bool { return a != nil && a.park != nil && a.park.parked }

// parker is the runner's timer heap of parked runs with a wake time.
type parker struct {
	mu    sync.Mutex
	h     wakeHeap
	at    map[string]*wakeEntry
	kick  chan struct{}
	once  sync.Once
	count int // parked runs, with a wake time or not (guarded by runner.mu)
	// unknown are the runs parked at start without a wake time (guarded
	// by runner.mu), which findWakes looks into once the server is ready.
	unknown []string
	scan    sync.Once
}

type wakeEntry struct {
	id   string
	wake time.Time
	i    int
}

type wakeHeap []*wakeEntry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].i = i; h[j].i = j }
func (h *wakeHeap) Push(x any)        { e := x.(*wakeEntry); e.i = len(*h); *h = append(*h, e) }
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// parkedRun notes that the engine returned run (its record) parked; release
// parks it (parkLocked). The run's goroutine calls it.
func (r *Host) parkedRun(run *state.Run, pb *playbook.Playbook, secrets map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.active[run.ID]
	if a == nil {
		return
	}
	if a.park == nil {
		a.park = &parkSlot{}
	}
	a.park.run, a.park.pb, a.park.secrets, a.park.wake, a.park.pending = run, pb, secrets, run.WakeAt, true
}

// parkLocked parks the run a of runID whose execution ended (release):
// it reports whether a stays among the runner's runs, parked or executed
// again at once (woken meanwhile). r.mu is held; the run's slot is given
// back already.
func (r *Host) parkLocked(runID string, a *runSlot) bool {
	if a == nil || a.park == nil || !a.park.pending || r.base.Err() != nil {
		return false
	}
	p := a.park
	a.waiting = false
	if p.wakeNow || (!p.wake.IsZero() && !p.wake.After(time.Now())) || !r.stillPaused(p.run, p.pb) {
		a.park = nil
		r.admitLocked(queuedRun{run: p.run, pb: p.pb, inputs: p.secrets})
		return true
	}
	a.park = &parkSlot{parked: true, wake: p.wake, secrets: p.secrets, key: p.run.QueuedOnKey,
		paused: p.run.Paused != "", labels: p.pb.Labels}
	r.parkedLocked(runID, a.park, p.run.CreatedAt)
	return true
}

// parkedLocked counts run runID, whose slot is now ps (parked), among the
// parked runs: in the timer heap, and queued on its key (ps.key) by its
// creation. r.mu is held.
func (r *Host) parkedLocked(runID string, ps *parkSlot, created time.Time) {
	r.park.count++
	r.park.add(r, runID, ps.wake)
	if ps.key != "" {
		r.keyParkLocked(ps.key, runID, created)
	}
}

// unparkLocked takes run runID, parked in slot a, out of the parked runs
// (parkedLocked's count, timer and key queue) and returns the secret
// inputs its slot kept; a holds no park then. r.mu is held.
func (r *Host) unparkLocked(runID string, a *runSlot) map[string]any {
	secrets := a.park.secrets
	if a.park.key != "" {
		r.keyUnparkLocked(a.park.key, runID)
	}
	a.park = nil
	r.park.count--
	r.park.remove(runID)
	return secrets
}

// parkAtStart parks a waiting run read at start (resumeAll) unless it is
// due, reporting whether it did; a due one is launched as before. A run
// parked by a pause is launched too: its pause may have been lifted while
// no process held the store, and one that still holds it parks the run
// again before its next step (pause.go).
func (r *Host) parkAtStart(run *state.Run) bool {
	if run.Status != state.RunWaiting || (!run.WakeAt.IsZero() && !run.WakeAt.After(time.Now())) || run.Paused != "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.active[run.ID]; dup || r.base.Err() != nil {
		return true
	}
	ps := &parkSlot{parked: true, wake: run.WakeAt, key: run.QueuedOnKey}
	r.active[run.ID] = &runSlot{playbook: run.Playbook, park: ps}
	r.parkedLocked(run.ID, ps, run.CreatedAt)
	if run.QueuedOnKey != "" {
		return true // its key is tried once the server is ready
	}
	if run.WakeAt.IsZero() && !run.AnswerOnly {
		r.park.unknown = append(r.park.unknown, run.ID)
		r.park.scan.Do(func() { go r.findWakes() })
	}
	return true
}

// findWakes gives a wake time to the runs an earlier build left waiting
// (neither WakeAt nor AnswerOnly), once the server is ready, from their
// waiting steps: an approval's deadline, a parked step's end; their
// approvals' timeouts would otherwise never fire. A run this build parked
// says when it is due, or that only an answer wakes it.
// (A sub-playbook run's deadline is not looked for: its parent goes on
// when next woken.)
func (r *Host) findWakes() {
	select {
	case <-r.ready:
	case <-r.base.Done():
		return
	}
	r.mu.Lock()
	ids := r.park.unknown
	r.park.unknown = nil
	r.mu.Unlock()
	for _, id := range ids {
		recs, err := r.store.Steps(r.base, id)
		if r.base.Err() != nil {
			return
		}
		if err != nil {
			continue
		}
		var wake time.Time
		for _, rec := range recs {
			if rec.Status != state.StepWaiting {
				continue
			}
			for _, t := range []time.Time{rec.WakeAt, approvalDeadline(rec)} {
				if !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
					wake = t
				}
			}
		}
		if wake.IsZero() {
			continue
		}
		r.mu.Lock()
		if a := r.active[id]; a.parked() && a.park.wake.IsZero() {
			a.park.wake = wake
			r.park.add(r, id, wake)
		}
		r.mu.Unlock()
	}
}

func approvalDeadline(rec *state.StepRecord) time.Time {
	if rec.Approval == nil {
		return time.Time{}
	}
	return rec.Approval.Deadline
}

// wakeRun executes the top-level run runID again now if this runner owns
// it: a parked one is launched (it queues for a slot), one executing or
// queued goes on at once if it parks. It reports whether the runner owns
// the run. Answers, cancels, notices and the timer wake runs through it.
func (r *Host) wakeRun(runID string) bool {
	r.mu.Lock()
	a := r.active[runID]
	if a == nil {
		r.mu.Unlock()
		return false
	}
	if !a.parked() {
		if a.park == nil {
			a.park = &parkSlot{}
		}
		a.park.wakeNow = true
		r.mu.Unlock()
		return true
	}
	secrets := r.unparkLocked(runID, a) // owned, neither parked nor queued while it is read
	r.mu.Unlock()

	// An unavailable store is read again until it answers (or the server
	// stops): the run stays this replica's meanwhile, never forgotten.
	var run *state.Run
	err := r.eng.RetryStore(r.base, runID, func() (err error) {
		run, err = r.store.GetRun(context.WithoutCancel(r.base), runID)
		return err
	})
	var pb *playbook.Playbook
	if err == nil {
		pb, err = r.Parse(run.File, run.Snapshot)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active[runID] != a {
		return true
	}
	if r.base.Err() != nil {
		return true // shutting down: it stays waiting for the next start
	}
	cancelled := err == nil && run.Status == state.RunCancelled
	if cancelled {
		// Recorded cancelled by another replica while it was parked here
		// (its notice, through cancelNotice, may be what woke it):
		// executed again, cancelled, so that it ends as a cancelled run
		// does (its finally steps run, its key is released).
		r.eng.CancelNext(runID, engine.RecordedCancelCause(run))
	} else if err != nil || run.Status.Done() {
		if err != nil {
			r.log.Error("cannot resume a parked run", "run_id", runID, "err", err)
			if cause := r.eng.ForgetCancel(runID); cause != nil {
				// It cannot execute to end cancelled: the cancel answered
				// for it is recorded (not while r.mu is held).
				r.wg.Go(func() { r.recordCancel(runID, cause) })
			}
		}
		delete(r.active, runID)
		return true
	}
	r.admitLocked(queuedRun{run: run, pb: pb, inputs: secrets, cancelled: cancelled})
	return true
}

// parkedCount is the number of parked runs (runbook_runs_parked).
func (r *Host) Parked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.park.count
}

// add puts runID in the heap at wake (none when zero) and starts the
// timer goroutine on first use.
func (p *parker) add(r *Host, runID string, wake time.Time) {
	if wake.IsZero() {
		return
	}
	p.once.Do(func() {
		p.at = map[string]*wakeEntry{}
		p.kick = make(chan struct{}, 1)
		go p.loop(r)
	})
	p.mu.Lock()
	if e := p.at[runID]; e != nil {
		e.wake = wake
		heap.Fix(&p.h, e.i)
	} else {
		e = &wakeEntry{id: runID, wake: wake}
		heap.Push(&p.h, e)
		p.at[runID] = e
	}
	first := p.h[0].id == runID
	p.mu.Unlock()
	if first {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// remove takes runID out of the heap.
func (p *parker) remove(runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.at[runID]; e != nil {
		heap.Remove(&p.h, e.i)
		delete(p.at, runID)
	}
}

// due pops the entries due at now and returns their run IDs and how long
// until the next one (-1: none).
func (p *parker) due(now time.Time) ([]string, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for len(p.h) > 0 && !p.h[0].wake.After(now) {
		e := heap.Pop(&p.h).(*wakeEntry)
		delete(p.at, e.id)
		ids = append(ids, e.id)
	}
	if len(p.h) == 0 {
		return ids, -1
	}
	return ids, p.h[0].wake.Sub(now)
}

// loop wakes the due runs until the runner stops: one goroutine and one
// timer for every parked run.
func (p *parker) loop(r *Host) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		ids, next := p.due(time.Now())
		for _, id := range ids {
			r.wakeRun(id)
		}
		if next < 0 {
			next = time.Hour
		}
		t.Reset(next)
		select {
		case <-r.base.Done():
			return
		case <-p.kick:
		case <-t.C:
		}
	}
}

// resumeParked makes run runID, parked in this server, go on now when a
// resume can (see resumable): its sleeps end, its retry delay is over, its
// task waits poll; it queues for a slot like any woken run.
func (r *Host) resumeParked(ctx context.Context, runID string) error {
	r.mu.Lock()
	a := r.active[runID]
	parked := a.parked()
	key := ""
	if parked {
		key = a.park.key
	}
	r.mu.Unlock()
	if !parked {
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is executing or queued in this server", runID)}
	}
	if err := r.resumable(ctx, runID, key); err != nil {
		return err
	}
	if err := r.recordWokenEarly(ctx, runID); err != nil {
		return err
	}
	r.wakeRun(runID) // it reads the run again, woken early
	return nil
}

// recordWokenEarly records the resume of run runID, parked here, before it
// is answered (state.Run.WokenEarly, WakeAt now): whichever process
// executes it next ends its timed waits at once, this one once the run has
// a slot, or another should this one stop first.
func (r *Host) recordWokenEarly(ctx context.Context, runID string) error {
	run, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if run.Status != state.RunWaiting || run.WokenEarly {
		return nil
	}
	run.WokenEarly, run.WakeAt, run.AnswerOnly = true, time.Now(), false
	ev := state.Event{Type: "run.woken", Message: "resumed: its sleeps, retry delays and task polls end now"}
	wctx := context.WithoutCancel(ctx)
	if r.rep != nil {
		wctx = state.WithFence(wctx, state.Fence{Owner: r.rep.id, Run: runID})
	}
	if err := r.store.SaveRun(wctx, run, ev); err != nil {
		return fmt.Errorf("record the resume of run %s: %w", runID, err)
	}
	r.observe(runID, ev)
	return nil
}

// resumable reports whether a resume can make run runID, parked, go on
// now: nil when one of its steps waits on a sleep, a retry's delay or a
// task's next poll; else a conflict naming what the run waits for, a
// concurrency key (key, the one it is queued on), an approval's answer or
// a sub-playbook run. It reads the store only, so it answers for a run
// parked on another replica too.
func (r *Host) resumable(ctx context.Context, runID, key string) error {
	if key != "" {
		holder := "another run"
		if locks, err := r.store.Locks(ctx); err == nil {
			for _, l := range locks {
				if l.Key == key {
					holder = "run " + l.Owner
				}
			}
		}
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is queued on concurrency key %q, held by %s: it goes on when the key is released", runID, key, holder)}
	}
	recs, err := r.store.Steps(ctx, runID)
	if err != nil {
		return err
	}
	var waits []string
	for _, rec := range recs {
		switch {
		case rec.Status != state.StepWaiting:
		case !rec.WakeAt.IsZero() || !rec.NextAttemptAt.IsZero():
			return nil
		case rec.Approval != nil:
			waits = append(waits, "an answer to approval step "+rec.ID)
		default:
			waits = append(waits, "the sub-playbook run of step "+rec.ID)
		}
	}
	what := "an answer"
	if len(waits) > 0 {
		what = strings.Join(waits, " and ")
	}
	return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is waiting for %s; a resume ends only a sleep, a retry's delay or a task's next poll", runID, what)}
}

// Approve records an answer to a waiting approval step of run runID (or
// of one of its sub-playbook runs), a compare-and-set in the store
// (engine.Answer), and, when the answer decided the step, wakes the run if
// this host holds it: it goes on at once. A run another replica holds is
// woken there by the store's notice of the answer.
func (r *Host) Approve(ctx context.Context, runID, step string, a state.Approval) error {
	decided, err := r.eng.Answer(ctx, runID, step, a)
	if err == nil && decided {
		r.wakeRun(r.eng.TopLevel(ctx, runID))
	}
	return err
}

// CancelRun cancels run runID (or a sub-playbook run of one) with cause if
// this host holds it, and reports whether it does. An executing run is
// cancelled through the engine; a parked one is executed once more,
// cancelled (its waiting steps cancelled, its finally run, its key
// released). A run that parks as it is cancelled goes on at once the same
// way. A run of an embedded host that waits until its lease is renewed
// stops there, unwritten (embedded.go).
func (r *Host) CancelRun(runID string, cause error) bool {
	top := runID
	if !r.Holds(top) {
		top = r.eng.TopLevel(context.WithoutCancel(r.base), runID)
	}
	if r.eng.Cancel(runID, cause) {
		r.wakeRun(top) // parked as it was cancelled: executed again at once
		return true
	}
	if r.cancelAwaitingLease(top, cause) {
		return true // stopped here, unwritten (embedded.go)
	}
	r.eng.CancelNext(runID, cause)
	if r.wakeRun(top) {
		return true
	}
	r.eng.ForgetCancel(runID)
	return false
}
