package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// SecretSource resolves secret names (environment, secrets file).
type SecretSource interface {
	Lookup(name string) (string, bool)
}

// Redactor masks registered secret values in everything the engine writes
// or shows.
type Redactor interface {
	// Add registers secret values (resolved secrets, secret inputs and
	// outputs); AddDerived registers values computed from them by
	// expressions (see expr.EvalDerived).
	Add(values ...string)
	AddDerived(values ...string)
	// Contains reports whether s holds a registered value: expressions
	// reading such a value derive from a secret.
	Contains(s string) bool
	String(s string) string
	Value(v any) any
	Bytes(b []byte) []byte
	Handler(h slog.Handler) slog.Handler
}

// Options configure an Engine. Store is required; the rest have defaults.
type Options struct {
	Store    state.Store
	Logger   *slog.Logger // engine diagnostics; step logs go to events
	Clock    Clock
	Secrets  SecretSource
	Redactor Redactor
	// Environ is the process environment seen as `env` (default os.Environ()).
	Environ []string
	// Connection resolves a named connection: service defaults and config,
	// overlaid with the playbook's override.
	Connection func(name string, override map[string]any) (map[string]any, error)
	// Playbooks loads sub-playbooks and re-parses snapshots.
	Playbooks Playbooks
	// Observer is told what the runs do as they do it.
	Observer Observer
	// Limits bound a run's parallel steps, output and late writes.
	Limits Limits
	// Process identifies this process in locks and runs.
	Process string
	// Host is what the run host hosting the runs decides (internal/runner
	// sets it); the zero Host: the caller executes each run to its end.
	Host Host
	// Sim is recorded as state.Run.Sim on every run this engine creates:
	// the URL of the simulator its connections point at, if any.
	Sim string
}

// Playbooks is where an engine gets playbooks other than the one it is
// given.
type Playbooks struct {
	// Load loads a sub-playbook by path.
	Load func(path string) (*playbook.Playbook, error)
	// Parse re-parses a run's snapshot on resume and retry. Its result may
	// be shared by every run of the same snapshot (a server caches it by
	// hash): the engine only reads a *playbook.Playbook, never changes it.
	Parse func(file string, src []byte) (*playbook.Playbook, error)
}

// Observer receives what the runs do, already redacted. Either may be nil.
type Observer struct {
	// Event receives every event as it happens.
	Event func(runID string, ev state.Event)
	// Output receives the steps' output lines in batches, as they are
	// written to the store's output area (with their Seq when the store
	// has one); see output.go.
	Output func(runID string, lines []state.OutputLine)
}

// Limits bound what a run may take. Zero fields take their defaults.
type Limits struct {
	// MaxParallel caps concurrently running steps of one run (default 8).
	MaxParallel int
	// MaxStepOutput is how many bytes of output one attempt of a step
	// keeps (default DefaultMaxStepOutput).
	MaxStepOutput int64
	// OutputFlushEvery is how long a line a step printed waits, at most,
	// before it is written while the step runs (default 200 ms); the lines
	// still waiting when the attempt ends go with its end.
	OutputFlushEvery time.Duration
	// StateWrites bounds how long a state write may go on once the run's
	// context ended (cancelled, or suspended at shutdown; default 10 s).
	// While the run lives its writes have no deadline: a slow store is
	// waited for.
	StateWrites time.Duration
}

// Host is what the run host of an engine's runs decides for them before
// they execute: how they park, whether their writes are fenced, and where
// a step placed on an agent executes. internal/runner sets all of it. What
// it decides while they execute it pushes into the engine (SetPauses,
// SetKeyQueued, SetLease, Fence): the engine calls nothing back.
type Host struct {
	// ParkAfter is the shortest long wait (a sleep, a task's next poll, a
	// retry's delay: steps.WaitUntil) that parks the run, unless the step
	// has a timeout of its own; a shorter one waits in process. Zero: no
	// such wait parks (only an unanswered approval, and a busy concurrency
	// key, park a run). A parked run is recorded waiting with
	// state.Run.WakeAt, the earliest moment one of its waits ends; its
	// host resumes it then or when an approval is answered (the run host:
	// internal/runner/park.go). A parked run holds no goroutine, and keeps
	// its concurrency key.
	ParkAfter time.Duration
	// DeferStart writes a new run's start (its record saying running and
	// "run.started") with the run's first write instead of on its own: a
	// run of pure steps ends in one commit. A run whose process dies
	// before that write stays pending, so this is for a process whose
	// pending runs are taken up again (runbook serve), not for runbook
	// run, whose killed run must show interrupted.
	DeferStart bool
	// Fence makes every write that moves a run forward conditional on its
	// top-level run still being owned by Options.Process (state.WithFence):
	// a replica (runbook serve, or runbook run on a database) sets it,
	// since another replica may take its runs over once its lease lapses.
	// A refused write stops the run at once, writing nothing more (see
	// fence.go); Execute and Resume then
	// return an error wrapping state.ErrFenced. The runs must be claimed
	// (their owner set to Options.Process) before they execute.
	Fence bool
	// Agents runs the attempts of steps placed on runbook agents
	// (runs_on; internal/agent); nil: such a step fails, saying this
	// process dispatches to no agent.
	Agents Agents
}

// Engine runs playbooks.
type Engine struct {
	o Options

	deliveries deliveryCache // payloads of stored webhook deliveries (delivery.go)

	mu     sync.Mutex
	active map[string]context.CancelCauseFunc // running runs of this process
	// cancelNext holds the causes of runs to cancel as soon as this
	// process executes them next (CancelParked).
	cancelNext map[string]error

	fences fencing   // Options.Host.Fence (fence.go)
	keys   keyQueues // the host's key queues, as it tells them (concurrency.go)
	lease  lease     // the lease the runs execute under, as the host renews it (fence.go)
	// pauses are the run pauses in force, as the host set them last
	// (SetPauses, pause.go).
	pauses atomic.Pointer[[]state.RunPause]

	// now and isSecret are Options.Clock.Now and Options.Redactor.Contains
	// as func values, made once: every expression scope and step call
	// takes them.
	now      func() time.Time
	isSecret func(string) bool
}

// New returns an engine. It panics without a Store.
func New(o Options) *Engine {
	if o.Store == nil {
		panic("engine: Options.Store is nil")
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Redactor == nil {
		o.Redactor = nopRedactor{}
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Limits.MaxParallel <= 0 {
		o.Limits.MaxParallel = 8
	}
	if o.Limits.MaxStepOutput <= 0 {
		o.Limits.MaxStepOutput = DefaultMaxStepOutput
	}
	if o.Limits.OutputFlushEvery <= 0 {
		o.Limits.OutputFlushEvery = outputFlushEvery
	}
	if o.Limits.StateWrites <= 0 {
		o.Limits.StateWrites = 10 * time.Second
	}
	if o.Process == "" {
		o.Process = thisProcess()
	}
	return &Engine{
		o: o, active: map[string]context.CancelCauseFunc{}, cancelNext: map[string]error{},
		keys: keyQueues{released: make(chan string, releasedBuffer)},
		now:  o.Clock.Now, isSecret: o.Redactor.Contains,
	}
}

// StartRequest describes a new run.
type StartRequest struct {
	ID         string         // optional; generated when empty
	Inputs     map[string]any // checked with ResolveInputs
	Trigger    map[string]any
	ParentID   string
	ParentStep string
	// Delivery refers to the stored webhook delivery the run is for;
	// trigger.payload and trigger.hook are resolved from it when the run
	// executes (Trigger lacks them).
	Delivery *state.DeliveryRef
	// Own commits the run as this process's (its Owner Options.Process)
	// where the engine claims the runs it executes (Claim: a coordinator
	// store and Options.Host.Fence): it is claimed in the commit that
	// creates it, and the caller executes it at once without a claim of
	// its own (runner.Host.Execute). Elsewhere it does nothing.
	Own bool
}

// ErrBusy is the cause of a run skipped because its concurrency key was held.
var ErrBusy = errors.New("concurrency key is busy")

// Start validates inputs and creates the run record (pending). Nothing runs
// yet: call Execute.
func (e *Engine) Start(ctx context.Context, pb *playbook.Playbook, req StartRequest) (*state.Run, error) {
	r, ev, err := e.Prepare(pb, req)
	if err != nil {
		return nil, err
	}
	if err := e.createRun(ctx, r, req.ID == "", ev); err != nil {
		return nil, err
	}
	e.observe(r.ID, ev)
	return r, nil
}

// Prepare is Start without the commit: it validates inputs, checks the
// playbook's secrets, registers secret inputs with the redactor and
// returns the run record (pending, with redacted inputs and trigger) and
// its first event, for the caller to commit with others in one transaction
// (state.Store.CommitDelivery). The record names the run's concurrency
// key when its inputs give it and it may be taken with the commit
// (preparedKey). A generated ID is unique within the process. Once the
// record is committed, call Committed; then Execute.
func (e *Engine) Prepare(pb *playbook.Playbook, req StartRequest) (*state.Run, state.Event, error) {
	inputs, err := ResolveInputs(pb, req.Inputs)
	if err != nil {
		return nil, state.Event{}, err
	}
	e.registerSecretInputs(pb, inputs)
	if missing := e.missingSecrets(pb); len(missing) > 0 {
		return nil, state.Event{}, e.secretsNotSet("", missing)
	}
	now := e.o.Clock.Now()
	id := req.ID
	if id == "" {
		id = newRunID(now)
	}
	r := &state.Run{
		ID: id, Playbook: pb.Name, File: pb.Path, Snapshot: pb.Source, Hash: pb.Hash,
		Inputs: e.redactMap(inputs), Trigger: e.redactMap(req.Trigger), Delivery: req.Delivery,
		Status: state.RunPending, ParentID: req.ParentID, ParentStep: req.ParentStep,
		CreatedAt: now, Sim: e.o.Sim, TakeOver: pb.TakeOver,
	}
	r.ConcurrencyKey = e.preparedKey(pb, inputs, r)
	if _, claims := e.claimer(); req.Own && claims && req.ParentID == "" {
		r.Owner = e.o.Process
	}
	ev := state.Event{Time: now, Type: "run.created", Message: "run created for playbook " + pb.Name}
	return r, ev, nil
}

// Committed reports the first event of a run Prepare returned, once the
// caller committed it, to the Observer (as Start does after its commit).
func (e *Engine) Committed(r *state.Run, ev state.Event) {
	e.observe(r.ID, ev)
}

// registerSecretInputs makes the redactor mask the values of secret
// inputs, before the run record (or anything else) is written.
func (e *Engine) registerSecretInputs(pb *playbook.Playbook, inputs map[string]any) {
	for _, in := range pb.Inputs {
		if !in.Secret {
			continue
		}
		switch v := inputs[in.Name].(type) {
		case nil:
		case string:
			if v != "" {
				e.o.Redactor.Add(v)
			}
		default:
			e.o.Redactor.Add(fmt.Sprint(v))
		}
	}
}

// idAttempts bounds the draws of a generated run ID. Generated IDs are
// unique within a process, but another process (or this one before a
// restart) may have taken one in the same second, so a taken ID is drawn
// again.
const idAttempts = 8

// createRun commits r. When its ID was generated and is taken, it draws
// another.
func (e *Engine) createRun(ctx context.Context, r *state.Run, generated bool, ev state.Event) error {
	for i := 0; ; i++ {
		err := e.o.Store.CreateRun(ctx, r, ev)
		if err == nil {
			return nil
		}
		if !generated || !errors.Is(err, state.ErrExists) || i+1 >= idAttempts {
			return fmt.Errorf("create run: %w", err)
		}
		r.ID = newRunID(r.CreatedAt)
	}
}

// Run starts and executes a run, returning its final record.
func (e *Engine) Run(ctx context.Context, pb *playbook.Playbook, req StartRequest) (*state.Run, error) {
	r, err := e.Start(ctx, pb, req)
	if err != nil {
		return nil, err
	}
	return e.execute(ctx, pb, r, req.Inputs)
}

// Execute executes a run that Start committed (pending) with its
// already-parsed playbook, returning the final record (or the waiting one,
// when an approval parks it). It is Run after Start: a server calls Start
// to answer a request, then Execute in a goroutine. The run's inputs are
// the ones Start recorded. It also executes a run created by Retry, with
// the playbook Retry returned.
//
// pb may be shared with other runs (a cache of parsed snapshots): the
// engine never mutates a *playbook.Playbook.
func (e *Engine) Execute(ctx context.Context, pb *playbook.Playbook, r *state.Run) (*state.Run, error) {
	return e.execute(ctx, pb, r, nil)
}

// ExecuteInputs is Execute with the raw inputs the caller gave Start. A
// secret input is masked in the run record, so the first execution of a
// run started with one needs it from the caller; a later resume (another
// process) sees it masked, as every resume does.
func (e *Engine) ExecuteInputs(ctx context.Context, pb *playbook.Playbook, r *state.Run, inputs map[string]any) (*state.Run, error) {
	return e.execute(ctx, pb, r, inputs)
}

// Resume continues an unfinished run (pending, running, waiting or
// cancelled) from its snapshot: finished steps are not run again. A run
// that succeeded or failed is not resumed: the error says why and the
// returned run is nil.
func (e *Engine) Resume(ctx context.Context, runID string) (*state.Run, error) {
	pb, r, err := e.resumable(ctx, runID)
	if err != nil {
		return nil, err
	}
	return e.execute(ctx, pb, r, nil)
}

// ResumeInputs is Resume with values for the run's secret inputs, which
// the state file keeps masked: a run started with one cannot continue
// without it (see execute). given may name secret inputs only.
func (e *Engine) ResumeInputs(ctx context.Context, runID string, given map[string]any) (*state.Run, error) {
	pb, r, err := e.resumable(ctx, runID)
	if err != nil {
		return nil, err
	}
	inputs, err := WithSecretInputs(pb, r, given)
	if err != nil {
		return nil, err
	}
	return e.execute(ctx, pb, r, inputs)
}

// WithSecretInputs returns the inputs of run r (a run of pb) with the
// values given for its secret inputs, which its record masks; given may
// name secret inputs only. ResumeInputs uses it, and the callers of
// Retry pass its result to ExecuteInputs.
func WithSecretInputs(pb *playbook.Playbook, r *state.Run, given map[string]any) (map[string]any, error) {
	secret := map[string]bool{}
	for _, in := range pb.Inputs {
		secret[in.Name] = in.Secret
	}
	inputs := maps.Clone(r.Inputs)
	if inputs == nil {
		inputs = map[string]any{}
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if !secret[name] {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
				"inputs.%s: only secret inputs can be given again; run %s keeps the inputs it started with", name, r.ID)}
		}
		inputs[name] = given[name]
	}
	return inputs, nil
}

// Resumable reads run runID and parses its snapshot, if it can resume: a
// conflict when it ended (a failed run is retried instead), an error
// when its snapshot no longer loads or a secret it needs is not set.
func (e *Engine) Resumable(ctx context.Context, runID string) (*playbook.Playbook, *state.Run, error) {
	return e.resumable(ctx, runID)
}

// resumable reads run runID and parses its snapshot, if it can resume.
func (e *Engine) resumable(ctx context.Context, runID string) (*playbook.Playbook, *state.Run, error) {
	r, err := e.storedRun(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	switch r.Status {
	case state.RunSucceeded, state.RunSkipped:
		return nil, nil, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s already %s; nothing to resume", r.ID, r.Status)}
	case state.RunFailed:
		return nil, nil, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("run %s failed; retry it instead of resuming", r.ID)}
	}
	pb, err := e.parseSnapshot(r, "resume")
	if err != nil {
		return nil, nil, err
	}
	if pb.Hash == r.Hash && len(pb.Source) == len(r.Snapshot) {
		// Share the (cached) playbook's bytes: many waiting runs of one
		// playbook hold one copy of the snapshot, not one each.
		r.Snapshot = pb.Source
	}
	if missing := e.missingSecrets(pb); missing != nil {
		return nil, nil, e.secretsNotSet("resume "+r.ID, missing)
	}
	return pb, r, nil
}

// storedRun reads run runID; NotFound when there is none.
func (e *Engine) storedRun(ctx context.Context, runID string) (*state.Run, error) {
	r, err := e.o.Store.GetRun(ctx, runID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("no run %q", runID)}
	}
	return r, err
}

// parseSnapshot parses the playbook snapshot of run r, to verb it
// (resume, retry).
func (e *Engine) parseSnapshot(r *state.Run, verb string) (*playbook.Playbook, error) {
	if e.o.Playbooks.Parse == nil {
		return nil, fmt.Errorf("engine: Options.Playbooks.Parse is required to %s", verb)
	}
	pb, err := e.o.Playbooks.Parse(r.File, r.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the playbook snapshot no longer loads: %w", verb, r.ID, err)
	}
	return pb, nil
}

// Cancel cancels a run executing in this process and reports whether it
// does (a parked run is cancelled by its host: CancelNext). The run ends cancelled, its error naming cause when given
// (any error: it is classified as a cancellation).
func (e *Engine) Cancel(runID string, cause error) bool {
	return e.cancelActive(runID, cancelCause(cause))
}

// cancelActive cancels run id with cause if it executes in this process,
// and reports whether it does. It cancels under e.mu, so that a run
// leaving parked (parkAndLeave) either is cancelled before it stops
// being active, and notes the cancel for its next execution, or is no
// longer active here, and its host notes it (CancelNext): cancelled just
// after the run read its cause, the cancel was lost, the run parked as
// if never cancelled. (A context's cancel calls no code of ours: its
// AfterFuncs run in goroutines of their own.)
func (e *Engine) cancelActive(id string, cause error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	cancel, ok := e.active[id]
	if ok {
		cancel(cause)
	}
	return ok
}

var errCancelledByUser = errors.New("cancelled")

// ReleaseStaleLocks releases concurrency locks held by runs that are not
// executing in this process (nor parked). Call it when this process is the only writer
// of the store (it holds the state file), before starting or resuming runs.
func (e *Engine) ReleaseStaleLocks(ctx context.Context) error {
	locks, err := e.o.Store.Locks(ctx)
	if err != nil {
		return err
	}
	for _, l := range locks {
		e.mu.Lock()
		_, live := e.active[l.Owner]
		e.mu.Unlock()
		if !live {
			// A parked run keeps its key until it ends (park.go).
			r, err := e.o.Store.GetRun(ctx, l.Owner)
			live = err == nil && r.Status == state.RunWaiting
		}
		if !live && lockLeftBehind(e.o.Store, l) {
			if err := e.o.Store.ReleaseLock(ctx, l.Key, l.Owner); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) missingSecrets(pb *playbook.Playbook) []string {
	var missing []string
	for _, name := range pb.Secrets {
		if _, onAgent := pb.AgentSecrets[name]; onAgent {
			continue // the agent that runs the step has it (agent.go)
		}
		v, ok := e.lookupSecret(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		e.o.Redactor.Add(v)
	}
	return missing
}

func (e *Engine) lookupSecret(name string) (string, bool) {
	if e.o.Secrets == nil {
		return "", false
	}
	return e.o.Secrets.Lookup(name)
}

func (e *Engine) observe(runID string, ev state.Event) {
	if e.o.Observer.Event != nil {
		e.o.Observer.Event(runID, ev)
	}
}

func (e *Engine) redactMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	if r, ok := e.o.Redactor.Value(m).(map[string]any); ok {
		return r
	}
	return m
}

type nopRedactor struct{}

func (nopRedactor) Add(...string)                       {}
func (nopRedactor) AddDerived(...string)                {}
func (nopRedactor) Contains(string) bool                { return false }
func (nopRedactor) String(s string) string              { return s }
func (nopRedactor) Value(v any) any                     { return v }
func (nopRedactor) Bytes(b []byte) []byte               { return b }
func (nopRedactor) Handler(h slog.Handler) slog.Handler { return h }
