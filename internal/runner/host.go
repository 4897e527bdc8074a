package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// Host is the run host of a process: the one component that claims,
// leases, fences, admits (execution slots, concurrency keys), parks,
// wakes, cancels and finishes runs, for one process alone on its store or
// for one of N replicas sharing it (replica.go). It executes runs in the
// background for the scheduler, the webhook intake and the API (it is
// their trigger.Starter). Every run it launches is committed first, so a
// crash at any point leaves a run the next start resumes.
type Host struct {
	o       Options
	eng     *engine.Engine
	store   state.Store
	log     *slog.Logger
	metrics Metrics
	cache   parseCache
	// ready is closed by Recover: stale locks are released and the runs
	// parked at start known.
	ready     chan struct{}
	readyOnce sync.Once

	base context.Context // parent of every run; cancelled with errShutdown
	stop context.CancelCauseFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	active map[string]*runSlot // the runs this process owns: executing or queued (queue.go)
	max    int                 // how many may hold a slot at once
	slots  int                 // how many do
	queue  []queuedRun         // launched runs waiting for a slot, first launched first
	// prepared holds what Launch needs of the runs Prepare returned, in two
	// generations: entries launched are deleted, the rest (runs of
	// duplicate deliveries, failed commits) are dropped with their
	// generation, between preparedTTL and twice that after Prepare.
	prepared, preparedOld map[string]preparedRun
	rotated               time.Time // when prepared became the current generation
	// held counts the slots held for prepared runs committed as this
	// replica's (see ownOnCommitLocked), and holds lists them, oldest
	// first, until they are let go (slotHold).
	held  int
	holds []slotHold

	rep *replica // nil: the store is not shared by replicas (replica.go)

	park parker  // parked runs with a wake time (park.go)
	keys keyPark // runs parked on a concurrency key (keys.go)

	draining *drain // set by Drain (drain.go)
	pauses   pauses // the run pauses, set in the engine (pause.go)

	// Of an embedded host (embedded.go): why runs stopped unfinished, a
	// channel closed at each change of its runs, and the cancels asked of
	// runs waiting until the lease is renewed.
	stopped map[string]error
	changed chan struct{}
	asked   map[string]chan error
}

// Options configure a Host. Engine.Store is required.
type Options struct {
	// Engine configures the host's engine. The host sets what hosting
	// decides: long waits park (ParkAfter), a new run's start is
	// written with its first write, and writes are fenced on a store
	// shared by replicas; while the runs execute it sets in the engine
	// its lease, its key queues and the run pauses.
	Engine engine.Options
	// MaxRunning bounds the runs executing at once (0: DefaultMaxRunning);
	// more wait, committed, in a queue (queue.go).
	MaxRunning int
	// Lease is how long a replica's lease on itself and its runs lasts
	// without renewal when the store is shared by replicas (default
	// DefaultLease, see replica.go).
	Lease time.Duration
	// TakeOverRunProcesses: the replicas take over the runs of a dead
	// `runbook run` process too (config server.take_over_run_processes).
	TakeOverRunProcesses bool
	// Watchdog is how often a host alone on its store looks for
	// unfinished runs that nothing in this process executes (default
	// 30 s), and Orphaned how long such a run may go without an executor
	// before it is taken up again (default 1 min).
	Watchdog, Orphaned time.Duration
	// KeyPoll is how often the runs parked on a concurrency key look for
	// a release nothing told of (keys.go; default 30 s, 1 s embedded).
	KeyPoll time.Duration
	Logger  *slog.Logger
	Metrics Metrics // nil: nothing counted
	// Embedded makes the host that of one CLI process (embedded.go): it
	// takes no other run (on a shared store it is a replica of kind run,
	// with the same Lease), writes a run's start on its own, and parks a
	// run only on an answer or a concurrency key (a step's moments are
	// waited for in process).
	Embedded bool
}

// Metrics counts what the host does (runbook serve's /metrics).
type Metrics interface {
	// Recovered counts an unfinished run taken up again: "returned" (its
	// execution came back unfinished), "orphaned" (the watchdog),
	// "taken" (from the replicas' queue).
	Recovered(how string)
	// Fenced counts a run stopped without writing: "refused" (its write
	// was), "lease" (this replica's lease lapsed).
	Fenced(why string)
	// Seed gives the runs read at start, to count them by status.
	Seed(runs []*state.Run)
	// Launched gives a run as recorded when it is launched here: what
	// the series of its steps and its end are labelled with, known
	// without reading it again.
	Launched(run *state.Run)
}

type nopMetrics struct{}

func (nopMetrics) Recovered(string)    {}
func (nopMetrics) Fenced(string)       {}
func (nopMetrics) Seed([]*state.Run)   {}
func (nopMetrics) Launched(*state.Run) {}

var (
	_ trigger.Preparer     = (*Host)(nil)
	_ trigger.FailRecorder = (*Host)(nil)
)

// New returns a host and builds its engine (Engine).
func New(o Options) *Host {
	if o.MaxRunning <= 0 {
		o.MaxRunning = DefaultMaxRunning()
	}
	if o.Watchdog <= 0 {
		o.Watchdog = 30 * time.Second
	}
	if o.Orphaned <= 0 {
		o.Orphaned = time.Minute
	}
	switch {
	case o.KeyPoll > 0:
	case o.Embedded:
		o.KeyPoll = time.Second
	default:
		o.KeyPoll = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	base, stop := context.WithCancelCause(context.Background())
	h := &Host{
		o: o, store: o.Engine.Store, log: o.Logger, metrics: o.Metrics, ready: make(chan struct{}),
		base: base, stop: stop, active: map[string]*runSlot{}, max: o.MaxRunning, prepared: map[string]preparedRun{}, rotated: time.Now(),
	}
	h.eng = engine.New(h.engineOptions(o.Engine))
	h.coordinate(o.Lease)
	return h
}

// DefaultParkAfter is the shortest sleep, task poll or retry delay that
// parks a run of a server (engine.Options.Host.ParkAfter): a shorter one holds
// its slot.
const DefaultParkAfter = 2 * time.Second

// engineOptions are eo with what hosting decides.
func (r *Host) engineOptions(eo engine.Options) engine.Options {
	// Waits park (park.go): a waiting run holds no goroutine.
	// A pending run of a server is taken up again: at the next start, by
	// the watchdog or another replica. One of a CLI process shows
	// interrupted once the process is gone: its start is written at once.
	eo.Host.DeferStart = !r.o.Embedded
	// Replicas, a CLI process's included, claim each run before
	// executing it; another takes it over once this one's lease lapsed:
	// this one's writes are fenced, and no step starts while its lease
	// lapsed (the lease sets it in the engine: replica.go, lapse.go).
	_, eo.Host.Fence = eo.Store.(state.Coordinator)
	switch {
	case r.o.Embedded:
		// A CLI process waits for its steps' moments in process: its
		// runs park only on an answer or a concurrency key (Await).
		eo.Host.ParkAfter = 0
	case eo.Host.ParkAfter <= 0:
		eo.Host.ParkAfter = DefaultParkAfter
	}
	eo.Playbooks.Parse = r.Parse
	if eo.Redactor == nil {
		eo.Redactor = secrets.NewRedactor()
	}
	if eo.Logger == nil {
		eo.Logger = r.log
	}
	observer := eo.Observer.Event
	eo.Observer.Event = func(runID string, ev state.Event) {
		r.observeSlot(runID, ev)
		if observer != nil {
			observer(runID, ev)
		}
	}
	return eo
}

// Engine is the host's engine.
func (r *Host) Engine() *engine.Engine { return r.eng }

// observe passes an event the host recorded itself (not the engine) to
// the engine's observer.
func (r *Host) observe(runID string, ev state.Event) {
	if o := r.o.Engine.Observer.Event; o != nil {
		o(runID, ev)
	}
}

// Start implements trigger.Starter: validate and commit the run, then
// execute it in the background.
func (r *Host) Start(ctx context.Context, req trigger.StartRequest) (string, error) {
	run, err := r.StartRun(ctx, req.Playbook, engine.StartRequest{Inputs: req.Inputs, Trigger: req.Trigger})
	if err != nil {
		return "", err
	}
	return run.ID, nil
}

func (r *Host) StartRun(ctx context.Context, pb *playbook.Playbook, req engine.StartRequest) (*state.Run, error) {
	if err := r.refusal(); err != nil {
		return nil, err
	}
	run, err := r.eng.Start(ctx, pb, req)
	if err != nil {
		return nil, err
	}
	// The executor changes run from the launch on: the caller gets the
	// record as committed.
	committed := *run
	r.launch(run, pb, req.Inputs, true)
	return &committed, nil
}

// StartFailed implements trigger.FailRecorder: a run that could not start
// (a missing secret, inputs that do not fit) is committed as failed with
// the reason, so `runs list` shows it. A server shutting down records
// nothing: its refusal is not the run's failure.
func (r *Host) StartFailed(ctx context.Context, req trigger.StartRequest, reason error) (string, error) {
	if r.base.Err() != nil || errors.Is(reason, ErrShuttingDown) || errors.Is(reason, ErrDraining) {
		return "", nil
	}
	run, err := r.eng.StartFailed(ctx, req.Playbook, engine.StartRequest{Inputs: req.Inputs, Trigger: req.Trigger}, reason)
	if err != nil {
		return "", fmt.Errorf("record failed run of %s: %w", req.Playbook.Name, err)
	}
	return run.ID, nil
}

// ErrShuttingDown refuses a run asked of a host that is stopping.
var ErrShuttingDown = errors.New("the server is shutting down")

// Active implements trigger.Starter.
func (r *Host) Active(playbookName string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, a := range r.active {
		if a.playbook == playbookName {
			ids = append(ids, id)
		}
	}
	return ids
}

func (r *Host) Holds(runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.active[runID]
	return ok
}

// holding reports whether this process owns run runID (isActive) and
// whether it holds it parked (isParked), under one lock: a listing asks
// it of every run.
func (r *Host) Holding(runID string) (active, parked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.active[runID]
	return ok, a.parked()
}

// count is the number of runs executing in this process, waiting ones
// included, queued ones not.
func (r *Host) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active) - len(r.queue)
}

// launch executes a committed run in the background: a new one (fresh,
// with the caller's raw inputs, which secret inputs need) or one to resume.
// It starts at once when a slot is free, else it is queued (queue.go).
func (r *Host) launch(run *state.Run, pb *playbook.Playbook, inputs map[string]any, fresh bool) {
	r.launchRun(queuedRun{run: run, pb: pb, inputs: inputs, fresh: fresh})
}

func (r *Host) launchRun(q queuedRun) {
	r.metrics.Launched(q.run)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.active[q.run.ID]; dup || r.base.Err() != nil {
		return
	}
	if r.drainingLocked() { // committed meanwhile: another takes it (drain.go)
		r.draining.letGo++
		r.wg.Go(func() { r.handRunsOver([]string{q.run.ID}) })
		return
	}
	r.active[q.run.ID] = &runSlot{playbook: q.pb.Name}
	r.admitLocked(q)
}

// Backoff between executions of a run that keeps coming back unfinished.
const (
	rerunFirst = time.Second
	rerunMax   = time.Minute
)

// execute runs run until it finishes, is parked, or the server
// suspends its runs. A run whose executor returns with the run
// unfinished for any other reason (a state write that failed, a lock
// that could not be taken) is logged at error and executed again from
// its record, with backoff: an acknowledged run is never left pending.
func (r *Host) execute(run *state.Run, pb *playbook.Playbook, inputs map[string]any, fresh bool) {
	runID, wait := run.ID, rerunFirst
	for {
		var (
			ended *state.Run
			err   error
		)
		switch {
		case fresh:
			ended, err = r.eng.ExecuteInputs(r.base, pb, run, inputs)
		case inputs != nil:
			ended, err = r.eng.ResumeInputs(r.base, runID, inputs)
		default:
			ended, err = r.eng.Resume(r.base, runID)
		}
		if r.base.Err() != nil {
			return // suspended: the next start resumes it
		}
		if errors.Is(err, state.ErrFenced) {
			again, why := r.fenced(runID, err)
			if !again {
				r.noteStopped(runID, why)
				return // another replica's now: forgotten here
			}
			fresh, inputs = false, secretInputs(pb, inputs)
			continue // claimed again after the lease was renewed
		}
		if err == nil && ended != nil && ended.Status.Done() {
			return // its last write, which says so, committed
		}
		var cur *state.Run
		gerr := r.eng.RetryStore(r.base, runID, func() (err error) {
			cur, err = r.store.GetRun(context.WithoutCancel(r.base), runID)
			return err
		})
		if r.base.Err() != nil {
			return // suspended: the next start resumes it
		}
		switch {
		case gerr == nil && cur.Status == state.RunCancelled && err == nil && ended != nil && !ended.Status.Done():
			// Recorded cancelled by another process as it parked here:
			// executed again at once, cancelled, so that it ends as a
			// cancelled run does (its finally steps run, its key released).
			r.eng.CancelNext(runID, engine.RecordedCancelCause(cur))
			fresh, inputs = false, secretInputs(pb, inputs)
			continue
		case gerr == nil && cur.Status.Done():
			if err != nil {
				r.log.Debug("run ended with an error", "run_id", runID, "err", err)
			}
			return
		case gerr == nil && cur.Status == state.RunWaiting && err == nil:
			r.parkedRun(cur, pb, secretInputs(pb, inputs)) // release parks it (park.go)
			return
		case errors.Is(gerr, state.ErrNotFound):
			r.log.Error("run vanished from the state store while executing", "run_id", runID)
			r.noteStopped(runID, gerr)
			return
		case errors.Is(err, engine.ErrNotWritten):
			// Executed again, the step whose record could not be written
			// would run twice: the run stays as last recorded, owned here,
			// until the server restarts.
			r.log.Error("run stopped: its state could not be written; it stays as last recorded", "run_id", runID, "err", err)
			r.noteStopped(runID, err)
			return
		}
		if gerr != nil {
			err = errors.Join(err, gerr)
		}
		if r.o.Embedded {
			// Its caller says why and how to go on (Await).
			r.noteStopped(runID, err)
			return
		}
		r.log.Error("run stopped unfinished; executing it again from its record", "run_id", runID, "err", err, "in", wait)
		r.metrics.Recovered("returned")
		select {
		case <-time.After(wait):
		case <-r.base.Done():
			return
		}
		wait = min(2*wait, rerunMax)
		fresh, inputs = false, secretInputs(pb, inputs)
	}
}

// secretInputs returns the secret inputs among inputs (nil when none):
// what a run resumed from its record needs given again.
func secretInputs(pb *playbook.Playbook, inputs map[string]any) map[string]any {
	var out map[string]any
	for _, in := range pb.Inputs {
		if v, ok := inputs[in.Name]; ok && in.Secret {
			if out == nil {
				out = map[string]any{}
			}
			out[in.Name] = v
		}
	}
	return out
}

// Recover takes up the unfinished runs, before the host's process
// serves: a host alone on its store releases the concurrency keys of the
// runs of earlier processes and resumes every unfinished run (resumeAll);
// a replica joins the others (replica.go). It returns how many runs it
// resumed or parked.
func (r *Host) Recover(ctx context.Context) (int, error) {
	defer r.readyOnce.Do(func() { close(r.ready) })
	if !r.o.Embedded {
		if err := r.ReadPauses(ctx); err != nil {
			return 0, err
		}
	}
	if err := r.releaseStaleLocks(ctx); err != nil {
		return 0, fmt.Errorf("release stale locks: %w", err)
	}
	return r.resumeAll(ctx)
}

// Run keeps the host's background work going until ctx ends: a replica's
// lease, notices and queue (replica.go), or the watchdog of a host alone
// on its store.
func (r *Host) Run(ctx context.Context) { r.watchdog(ctx, r.o.Watchdog, r.o.Orphaned) }

// watchdog takes up, every interval, the unfinished top-level runs that
// nothing in this process executes and that were created more than
// orphaned ago: a run whose launch was lost would otherwise wait for the
// next start. Each is logged at error and counted
// (runbook_runs_recovered_total{reason="orphaned"}).
//
// Replicas (replica.go) take runs from their shared queue instead.
func (r *Host) watchdog(ctx context.Context, interval, orphaned time.Duration) {
	if r.rep != nil {
		ctx, quit := context.WithCancel(ctx)
		r.mu.Lock()
		r.rep.quit = quit
		r.mu.Unlock()
		r.replicate(ctx)
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.base.Err() != nil {
			return
		}
		r.adoptOrphans(ctx, orphaned)
	}
}

// adoptOrphans is one pass of the watchdog; it returns how many runs it
// took up.
func (r *Host) adoptOrphans(ctx context.Context, orphaned time.Duration) int {
	runs, err := r.store.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunPending, state.RunRunning, state.RunWaiting, state.RunSuspended}})
	if err != nil {
		r.log.Warn("watchdog: cannot list unfinished runs", "err", err)
		return 0
	}
	n := 0
	for _, run := range runs {
		if run.ParentID != "" || time.Since(run.CreatedAt) < orphaned || r.Holds(run.ID) || r.isPrepared(run.ID) {
			continue
		}
		// Read it again: it may have finished since the listing.
		cur, err := r.store.GetRun(ctx, run.ID)
		if err != nil || cur.Status.Done() || r.Holds(run.ID) {
			continue
		}
		pb, err := r.Parse(cur.File, cur.Snapshot)
		if err != nil {
			r.log.Error("watchdog: an unfinished run's playbook snapshot no longer loads", "run_id", cur.ID, "err", err)
			continue
		}
		r.log.Error("watchdog: unfinished run without an executor; resuming it from its record", "run_id", cur.ID, "status", cur.Status, "created_at", cur.CreatedAt)
		r.metrics.Recovered("orphaned")
		r.launch(cur, pb, nil, false)
		n++
	}
	return n
}

// resumeAll launches every unfinished top-level run (pending, running,
// waiting or suspended; sub-playbook runs are resumed by their parent's step). A run
// whose snapshot no longer parses is marked failed rather than left
// running forever. A replica (replica.go) resumes nothing here: it joins
// the others and takes runs from their queue.
func (r *Host) resumeAll(ctx context.Context) (int, error) {
	if r.rep != nil {
		return 0, r.join(ctx)
	}
	runs, err := r.store.ListRuns(ctx, state.RunFilter{})
	if err != nil {
		return 0, fmt.Errorf("list runs to resume: %w", err)
	}
	r.metrics.Seed(runs)
	// Oldest first: the queue starts them in this order.
	slices.SortStableFunc(runs, func(a, b *state.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	n := 0
	for _, run := range runs {
		if run.ParentID != "" || run.Status.Done() {
			continue
		}
		if r.parkAtStart(run) {
			n++ // waiting: parked until due or woken (park.go)
			continue
		}
		// Read it whole: a listed run of an earlier build lacks the
		// webhook payload its trigger carries inline.
		if run, err = r.store.GetRun(ctx, run.ID); err != nil {
			return n, fmt.Errorf("read run to resume: %w", err)
		}
		pb, err := r.Parse(run.File, run.Snapshot)
		if err != nil {
			r.log.Error("cannot resume run: its playbook snapshot no longer loads", "run_id", run.ID, "err", err)
			continue
		}
		r.launch(run, pb, nil, false)
		n++
	}
	return n, nil
}

// suspendAll stops every executing run with its state persisted, so the
// next start resumes it: the engine leaves suspended runs unfinished
// (steps interrupted mid-way are redone, mutating ones reconcile first).
func (r *Host) Suspend(grace time.Duration) {
	r.stop(errSuspend)
	r.mu.Lock()
	r.dispatchLocked() // drops the queue
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		r.log.Warn("runs still stopping after the grace period; they resume at the next start", "runs", r.Running())
	}
	// Cancels answered for runs that waited for a slot (dropped with the
	// queue) or that no execution took since: on record, so that they do
	// not come back uncancelled at the next start.
	for id, cause := range r.eng.TakeCancels() {
		r.recordCancel(id, cause)
	}
	if r.rep != nil {
		r.leave()
	}
}

// retry starts a retry of a failed or cancelled run from step from (empty:
// the first step that did not succeed), reusing the outputs of the steps
// before it.
// The values given for secret inputs (its record masks them) are checked
// before the new run is created.
func (r *Host) Retry(ctx context.Context, runID, from string, secretInputs map[string]any, by string) (*state.Run, error) {
	run, pb, inputs, err := r.prepareRetry(ctx, runID, from, secretInputs, by)
	if err != nil {
		return nil, err
	}
	committed := *run // as in start
	r.launch(run, pb, inputs, true)
	return &committed, nil
}

// prepareRetry checks the values given for the secret inputs of run
// runID, commits its retry and returns it with its playbook and inputs.
func (r *Host) prepareRetry(ctx context.Context, runID, from string, secretInputs map[string]any, by string) (*state.Run, *playbook.Playbook, map[string]any, error) {
	if err := r.refusal(); err != nil {
		return nil, nil, nil, err
	}
	if len(secretInputs) > 0 {
		old, err := r.store.GetRun(ctx, runID)
		if err != nil {
			return nil, nil, nil, err
		}
		pb, err := r.Parse(old.File, old.Snapshot)
		if err != nil {
			return nil, nil, nil, err
		}
		if _, err := engine.WithSecretInputs(pb, old, secretInputs); err != nil {
			return nil, nil, nil, err
		}
	}
	run, pb, err := r.eng.Retry(ctx, runID, from)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := r.recordRetrier(ctx, run, by); err != nil {
		return nil, nil, nil, err
	}
	r.Remember(pb)
	var inputs map[string]any
	if len(secretInputs) > 0 {
		if inputs, err = engine.WithSecretInputs(pb, run, secretInputs); err != nil {
			return nil, nil, nil, err
		}
	}
	return run, pb, inputs, nil
}

// resume continues run (its record) in this server, with the values given
// for its secret inputs. A run executing here, or one that ended
// succeeded, failed or skipped, is a conflict; a cancelled run whose
// execution here is still letting it go is waited for.
func (r *Host) Resume(ctx context.Context, run *state.Run, secretInputs map[string]any) error {
	if err := r.refusal(); err != nil {
		return err
	}
	switch run.Status {
	case state.RunSucceeded, state.RunFailed, state.RunSkipped:
		hint := ""
		if run.Status == state.RunFailed {
			hint = "; retry it instead"
		}
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s already %s%s", run.ID, run.Status, hint)}
	}
	if run.ParentID != "" {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("run %s is a sub-playbook run: resume its parent %s", run.ID, run.ParentID)}
	}
	if run.Status == state.RunWaiting && run.Paused != "" {
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s is %s: it goes on when the pause is lifted (runbook pause list, runbook resume)", run.ID, run.Paused)}
	}
	if run.Status == state.RunCancelled {
		// Its end is written; the execution that wrote it gives the run
		// back just after.
		if err := r.awaitLetGo(ctx, run.ID); err != nil {
			return err
		}
	}
	if r.Holds(run.ID) {
		return r.resumeParked(ctx, run.ID) // a parked run goes on now (park.go)
	}
	pb, err := r.Parse(run.File, run.Snapshot)
	if err != nil {
		return fmt.Errorf("resume %s: the playbook snapshot no longer loads: %w", run.ID, err)
	}
	if len(secretInputs) > 0 {
		if _, err := engine.WithSecretInputs(pb, run, secretInputs); err != nil {
			return err
		}
	}
	owned, done, err := r.resumeElsewhere(ctx, run)
	if done {
		return err
	}
	// An explicit resume takes the run over from a `runbook run` process
	// too (never from a live replica).
	r.launchRun(queuedRun{run: run, pb: pb, inputs: secretInputs, adopt: true, owned: owned})
	return nil
}

// awaitLetGo waits until this host no longer executes run runID: not
// held, or held parked.
func (r *Host) awaitLetGo(ctx context.Context, runID string) error {
	for {
		changed := r.changes()
		if active, parked := r.Holding(runID); !active || parked {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// errSuspend is the cause the runs are stopped with at shutdown.
var errSuspend = engine.ErrSuspend
