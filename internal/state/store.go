package state

import (
	"context"
	"errors"
	"time"
)

// FormatVersion is the version of the bbolt store's layout (its doc.go),
// recorded in every file. A store reads files of this version only: a
// file of another is refused at open (see "Formats" in the package doc).
const FormatVersion = 8

var (
	// ErrNotFound: no run, step, intent, cursor or approval with that key.
	ErrNotFound = errors.New("not found")
	// ErrExists: CreateRun with an ID that is already taken.
	ErrExists = errors.New("already exists")
	// ErrLocked: the state file is held by another process.
	ErrLocked = errors.New("state file is in use by another process")
	// ErrCorrupt: the file is not a runbook state file or is damaged.
	ErrCorrupt = errors.New("state file is corrupt")
	// ErrFenced: a write made for the owner a Fence names (WithFence) was
	// refused because that owner no longer owns the run: another replica
	// took it over. Nothing of the write was written. See FencedError.
	ErrFenced = errors.New("run is owned by another process now")
	// ErrUnavailable marks an error that trying again can cure: the store
	// could not be reached, or it cut the connection (a database server
	// restarting, a connection terminated, a transaction it aborted for a
	// conflict). A write that failed so may or may not have been made;
	// every write of the Store is safe to make again. A store wraps it
	// (errors.Is); any other error of a write (a disk full, a file too
	// large, an I/O error) is not cured by waiting.
	ErrUnavailable = errors.New("state store unavailable")
	// ErrNotServing marks an ErrUnavailable error by which the store said
	// that it serves no process at all at that moment: nothing listens on
	// the database's address, or it answered that it accepts no
	// connection (starting up, shutting down, recovering). No other
	// process writes meanwhile, and, on a store shared by replicas
	// (Coordinator), none takes another's run until every live replica
	// could renew its lease after the store came back.
	ErrNotServing = errors.New("state store serves no one")
	// ErrHeldByAnother: ReleaseLock of a key another run holds (the key
	// is left as it is). A key is taken from a run that ended
	// (RunStatus.KeyFreed) before that run released it, so its release
	// then finds the key another's.
	ErrHeldByAnother = errors.New("the key is held by another run")
)

// RunStatus is the lifecycle of a run.
type RunStatus string

const (
	RunPending   RunStatus = "pending"   // created, not started (queued on a concurrency key)
	RunRunning   RunStatus = "running"   // a process is executing it
	RunWaiting   RunStatus = "waiting"   // parked on an approval
	RunSuspended RunStatus = "suspended" // stopped by a server shutdown with its state saved; resumes at the next start
	RunSucceeded RunStatus = "succeeded" //
	RunFailed    RunStatus = "failed"    //
	RunCancelled RunStatus = "cancelled" //
	RunSkipped   RunStatus = "skipped"   // not started: concurrency key busy with on_busy: skip
)

// Done reports whether the status is final.
func (s RunStatus) Done() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled || s == RunSkipped
}

// EndFreesKey is implemented by a store whose write of a run in a status
// that frees its key (RunStatus.KeyFreed: SaveRun, SaveRunSteps) also
// frees the concurrency key the run holds (Run.ConcurrencyKey, held in
// the run's name), in the same transaction, when the write records that
// status: the process executing the run need not release the key after
// (one transaction a keyed run less). A write that is refused frees
// nothing.
type EndFreesKey interface {
	EndFreesKey() bool
}

// StatusReader is implemented by a store that reads runs' statuses
// without their records: a check that needs only the status (has a
// queued run ended meanwhile? which of the runs a scrape counts ended?)
// reads a column, not the records and their snapshots. RunStatuses
// returns the status of each of ids that exists, in one read; a run that
// does not exist is absent from the map.
type StatusReader interface {
	RunStatuses(ctx context.Context, ids []string) (map[string]RunStatus, error)
}

// ClaimReadsStatus is implemented by a coordinator whose ClaimRun reads
// the run's status as it claims it, and that keeps the status of a run
// committed already claimed (a delivery's run whose record names its
// owner): ClaimedStatus returns that status (ok false: none kept; then
// read it) while nothing was written to the run through this store since
// and the claim is a moment old. A runner
// checking a run it has just claimed (was it cancelled while it waited
// for a slot?) needs no read of its own.
type ClaimReadsStatus interface {
	ClaimedStatus(id string) (status RunStatus, ok bool)
}

// KeyFreed reports whether a run recorded so holds no concurrency key: it
// ended succeeded, failed or skipped, statuses only the process executing
// the run writes, once nothing of the run executes any more. AcquireLock
// takes a key such a run still holds: a run whose last write committed
// while its process saw an error (the database restarting under it) and
// then lost the run keeps no key from every run queued on it. A cancelled
// run is not among them: a cancellation is recorded by whoever cancels,
// while the run's owner may still be stopping a step; the owner releases
// the key once it has.
func (s RunStatus) KeyFreed() bool {
	return s == RunSucceeded || s == RunFailed || s == RunSkipped
}

// StepStatus is the lifecycle of one step (or one for_each item).
type StepStatus string

const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepWaiting   StepStatus = "waiting" // approval
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped" // `if` was false or a needed step did not succeed
	StepCancelled StepStatus = "cancelled"
)

// Done reports whether the status is final.
func (s StepStatus) Done() bool {
	return s == StepSucceeded || s == StepFailed || s == StepSkipped || s == StepCancelled
}

// Run is one execution of a playbook.
type Run struct {
	ID       string `json:"id"`
	Playbook string `json:"playbook"`       // playbook name
	File     string `json:"file,omitempty"` // path it was loaded from
	// Snapshot is the playbook source the run started with and Hash its
	// SHA-256 (hex); a resumed run executes the snapshot, not the file.
	Snapshot []byte         `json:"snapshot,omitempty"`
	Hash     string         `json:"hash"`
	Inputs   map[string]any `json:"inputs,omitempty"`
	Trigger  map[string]any `json:"trigger,omitempty"`
	Status   RunStatus      `json:"status"`
	Error    *ErrorRecord   `json:"error,omitempty"`
	// Delivery refers to the stored webhook delivery the run was started
	// for; its trigger.payload and trigger.hook are resolved from it (see
	// DeliveryRef). Nil for other runs, and for runs of earlier builds,
	// whose Trigger carries the payload inline.
	Delivery *DeliveryRef `json:"delivery,omitempty"`
	// Outputs are the playbook's outputs, set when the run ends.
	Outputs map[string]any `json:"outputs,omitempty"`
	// ParentID/ParentStep link a sub-playbook run to its caller.
	ParentID   string `json:"parent_id,omitempty"`
	ParentStep string `json:"parent_step,omitempty"`
	// RetryOf/RetryFrom mark a retry: a new run of a failed run's snapshot
	// that starts at step RetryFrom and reuses the outputs of the steps
	// before it (copied from run RetryOf).
	RetryOf        string    `json:"retry_of,omitempty"`
	RetryFrom      string    `json:"retry_from,omitempty"`
	ConcurrencyKey string    `json:"concurrency_key,omitempty"`
	Owner          string    `json:"owner,omitempty"` // process executing it
	CreatedAt      time.Time `json:"created_at"`
	StartedAt      time.Time `json:"started_at,omitzero"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	// Deadline is the run timeout as an absolute time (zero: none), so a
	// resumed run keeps its original deadline.
	Deadline time.Time `json:"deadline,omitzero"`
	// WakeAt is when a waiting run is due to go on by itself (zero: only an
	// answer wakes it): the earliest end of its parked waits (a sleep, a
	// task's next poll, an approval's timeout) or its deadline. A server
	// resumes it then, holding nothing for it until that time.
	WakeAt time.Time `json:"wake_at,omitzero"`
	// AnswerOnly is set on a waiting run whose WakeAt is zero because
	// only an answer (or a cancel) wakes it. A waiting run with neither
	// was left by an earlier build, which did not record WakeAt: a server
	// reads its steps for the moment it is due.
	AnswerOnly bool `json:"answer_only,omitempty"`
	// Sim is the URL of the `runbook sim` the run was started against
	// (--sim-url), without credentials, so an approval, a resume or a
	// retry reaches the same simulated resources; empty otherwise.
	Sim string `json:"sim,omitempty"`
	// TakeOver is the playbook's `take_over: true`: on a shared store, the
	// `runbook serve` replicas may take the run over once the `runbook run`
	// process that owns it is gone (its lease expired), as they do
	// for every run with server.take_over_run_processes.
	TakeOver bool `json:"take_over,omitempty"`
	// QueuedOnKey is set on a waiting run parked until its concurrency key,
	// held by another run, is released (on_busy: queue under runbook
	// serve): it does not hold the key and has not started its steps.
	QueuedOnKey string `json:"queued_on_key,omitempty"`
	// Paused is set on a waiting run parked because its playbook is paused
	// (a RunPause): who paused it and why. The run started no step since;
	// its host wakes it when the pause is lifted.
	Paused string `json:"paused,omitempty"`
	// WokenEarly is set on a parked run that a resume (the API's) woke
	// before its waits that end at a moment had ended: its next execution,
	// in whichever process, ends them at once (a sleep, a retry's delay,
	// a task's next poll), as the process that answered the resume would
	// have, and clears it. WakeAt is then the moment of the resume.
	WokenEarly bool `json:"woken_early,omitempty"`
}

// ErrorRecord is a persisted, redacted error.
type ErrorRecord struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// StepRecord is the persisted state of one step or one for_each item.
type StepRecord struct {
	RunID string `json:"run_id"`
	// ID is the step id, with the item index for for_each items: "deploy[3]".
	ID         string         `json:"id"`
	Status     StepStatus     `json:"status"`
	Attempts   int            `json:"attempts"`
	Outputs    map[string]any `json:"outputs,omitempty"`
	Error      *ErrorRecord   `json:"error,omitempty"`
	Checkpoint []byte         `json:"checkpoint,omitempty"` // Host.Checkpoint data
	StartedAt  time.Time      `json:"started_at,omitzero"`
	EndedAt    time.Time      `json:"ended_at,omitzero"`
	// NextAttemptAt is set while waiting between retries, so a resumed run
	// waits out the remaining delay only.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// WakeAt is set while the step is parked until a moment (a sleep's
	// end, a cloud task's next poll; see steps.WaitUntil): it waits for no
	// one's answer and goes on by itself then.
	WakeAt time.Time `json:"wake_at,omitzero"`
	// Approval is what a waiting approval step asks, so that an answer
	// is checked against it before it is recorded.
	Approval *ApprovalRequest `json:"approval,omitempty"`
	// Printed is output of the step that this write of the record appends
	// to the run's output area in the same transaction, after the run's
	// last lines (as StepOutput.AppendOutput would): the engine hands an
	// attempt's last lines to the write of its end instead of committing
	// them on their own first. It is not part of the record: a read
	// returns none, and a write without it appends nothing.
	Printed []OutputLine `json:"-"`
}

// ApprovalRequest is the question of a waiting approval step: who may
// answer and the typed fields of the answer.
type ApprovalRequest struct {
	Approvers []string                 `json:"approvers,omitempty"`
	Fields    map[string]ApprovalField `json:"fields,omitempty"`
	Deadline  time.Time                `json:"deadline,omitzero"`
	// Required is how many distinct approvers must approve (0: 1);
	// AllowSelfApproval lets whoever started the run be one of them.
	Required          int  `json:"required,omitempty"`
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
}

// ApprovalField is one typed field of an approval's answer. Its default
// value is not kept: a field with a default is not Required.
type ApprovalField struct {
	Type     string `json:"type"` // string, integer, number, boolean
	Required bool   `json:"required,omitempty"`
}

// Event is one entry of a run's append-only log.
type Event struct {
	Seq     uint64         `json:"seq"` // assigned by the store, per run, from 1
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"` // run.started, step.started, step.succeeded, step.retry, log, ...
	Step    string         `json:"step,omitempty"`
	Attempt int            `json:"attempt,omitempty"`
	Level   string         `json:"level,omitempty"` // for log events
	Message string         `json:"message,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// Intent is recorded before a mutating call and resolved after it.
type Intent struct {
	RunID     string    `json:"run_id"`
	Step      string    `json:"step"`
	Attempt   int       `json:"attempt"`
	Key       string    `json:"key"` // idempotency key
	CreatedAt time.Time `json:"created_at"`
	Data      []byte    `json:"data,omitempty"`
	Resolved  bool      `json:"resolved"` // the call's outcome was recorded
}

// Approval is the answer to an approval step, written by whoever answers.
type Approval struct {
	RunID    string         `json:"run_id"`
	Step     string         `json:"step"`
	Approved bool           `json:"approved"`
	By       string         `json:"by,omitempty"`
	Comment  string         `json:"comment,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
	At       time.Time      `json:"at"`
	// Roles are the answerer's roles when it was given (approvers may
	// name roles).
	Roles []string `json:"roles,omitempty"`
	// Pending marks an approval that still needs more answers (the
	// step's required); Answers lists every answer given, in order.
	Pending bool             `json:"pending,omitempty"`
	Answers []ApprovalAnswer `json:"answers,omitempty"`
	// TimedOut marks an approval decided by its deadline, no answer having
	// decided it before: answers after it are refused.
	TimedOut bool `json:"timed_out,omitempty"`
}

// Decide is AnswerApproval's decision: from the approval step's record
// and the approval recorded so far (each nil when there is none), the
// approval to record and the events to append with it (a nil approval:
// nothing is written), or an error that refuses the answer.
type Decide func(step *StepRecord, prev *Approval) (*Approval, []Event, error)

// Lock is a held concurrency key.
type Lock struct {
	Key     string    `json:"key"`
	Owner   string    `json:"owner"` // run ID holding it
	Process string    `json:"process,omitempty"`
	Since   time.Time `json:"since"`
}

// RunFilter selects runs for ListRuns. Zero fields match everything.
type RunFilter struct {
	Status   []RunStatus
	Playbook string
	ParentID string
	// TriggerKey keeps the runs whose trigger's "key" is this (a webhook
	// unit's identity, see trigger.webhookTrigger); empty: any.
	TriggerKey string
	// Before keeps the runs after this position in the listing: with
	// CursorAfter of a page's last run, the next page (keyset paging; see
	// RunCursor). Nil: from the newest.
	Before *RunCursor
	Limit  int // 0: no limit
}

// Store persists everything a run needs to survive a crash. Every method
// is one atomic transaction: a SaveStep with events writes the record and
// the events together or not at all. Methods that write to or read from a
// run (SaveRun, SaveStep, Steps, AppendEvents, Events, PutIntent,
// AnswerApproval) fail with ErrNotFound when the run was never created. The
// store assigns event Seq (the caller's is ignored) and sets a zero event
// Time, run CreatedAt or lock Since to now. The contract suite is
// internal/state/statetest.
type Store interface {
	CreateRun(ctx context.Context, r *Run, events ...Event) error // ErrExists if taken
	SaveRun(ctx context.Context, r *Run, events ...Event) error
	GetRun(ctx context.Context, id string) (*Run, error) // ErrNotFound
	DeleteRun(ctx context.Context, id string) error      // a finished run and all it holds; ErrNotFound, ErrNotFinished
	// ListRuns returns runs newest first, without the webhook payload a
	// run of an earlier build carries inline in its trigger ("payload" and
	// "hook"; GetRun returns the run whole).
	ListRuns(ctx context.Context, f RunFilter) ([]*Run, error)
	// RecentRuns returns the newest runs of each playbook of names, at
	// most n of each, newest first and as ListRuns lists them, in one
	// read (a run history of every playbook at once). A playbook without
	// runs has no entry.
	RecentRuns(ctx context.Context, names []string, n int) (map[string][]*Run, error)

	SaveStep(ctx context.Context, s *StepRecord, events ...Event) error
	// SaveSteps writes several records of one run with events, atomically.
	SaveSteps(ctx context.Context, recs []*StepRecord, events ...Event) error
	// SaveRunSteps writes step records of run r (as SaveSteps) and r's
	// record (as SaveRun) and appends events, in one transaction: a run's
	// last steps and its end are one commit.
	SaveRunSteps(ctx context.Context, r *Run, recs []*StepRecord, events ...Event) error
	GetStep(ctx context.Context, runID, stepID string) (*StepRecord, error) // ErrNotFound
	// Steps returns a run's step records in the order they were first saved.
	Steps(ctx context.Context, runID string) ([]*StepRecord, error)

	AppendEvents(ctx context.Context, runID string, events ...Event) error
	// Events returns events with Seq > after, at most limit (0: all).
	Events(ctx context.Context, runID string, after uint64, limit int) ([]Event, error)

	PutIntent(ctx context.Context, in Intent) error
	GetIntent(ctx context.Context, runID, step string) (*Intent, error) // ErrNotFound

	// AnswerApproval answers approval step step of run runID as a
	// compare-and-set, in one transaction: it reads the step's record and
	// the approval recorded so far (each nil when there is none), calls
	// decide with them, and writes the approval decide returns together
	// with its events, or nothing when decide returns a nil approval or
	// an error (returned as it is). Answers to one approval are
	// serialized, whichever process or replica gives them: each decide
	// sees every answer committed before it, so none is lost. decide may
	// be called more than once (a transaction run again) and must not
	// keep anything from a call that was not the last. A concurrent
	// answer the store could not serialize after retrying is refused with
	// a fault.Conflict error, never dropped. A run that does not exist is
	// ErrNotFound; a write that ctx's fence refuses is a *FencedError.
	AnswerApproval(ctx context.Context, runID, step string, decide Decide) error
	GetApproval(ctx context.Context, runID, step string) (*Approval, error) // ErrNotFound

	// AcquireLock takes key for owner if free (or already owner's, or
	// held by a run recorded with a status whose KeyFreed is true). It
	// returns false and the current holder otherwise.
	AcquireLock(ctx context.Context, l Lock) (ok bool, holder *Lock, err error)
	// ReleaseLock frees key if owner holds it; a free key is no error, a
	// key held by another owner stays held and is ErrHeldByAnother.
	ReleaseLock(ctx context.Context, key, owner string) error
	Locks(ctx context.Context) ([]Lock, error)

	GetCursor(ctx context.Context, key string) ([]byte, error) // ErrNotFound
	PutCursor(ctx context.Context, key string, val []byte) error

	// Dedup records key and reports whether it was already recorded. Keys
	// older than ttl (0: forever) are forgotten.
	Dedup(ctx context.Context, key string, ttl time.Duration) (seen bool, err error)
	// DedupGet returns the value attached to a live (unexpired) dedup key;
	// ErrNotFound when the key is absent, expired or has no value.
	DedupGet(ctx context.Context, key string) ([]byte, error)
	// DedupSet attaches val to a live dedup key, replacing any value
	// (ErrNotFound when there is none). The value is forgotten with the
	// key: it expires when the key does, and a key recorded again after
	// expiry starts without a value.
	DedupSet(ctx context.Context, key string, val []byte) error

	// CommitDelivery commits a webhook delivery in one transaction: its
	// claim, the claims of its units, the runs they start and its body,
	// all or nothing. See Delivery.
	CommitDelivery(ctx context.Context, d Delivery) (DeliveryResult, error)
	// GetDelivery returns the body CommitDelivery stored under id
	// (ErrNotFound).
	GetDelivery(ctx context.Context, id string) ([]byte, error)
	// DeleteUnusedDeliveries deletes the stored delivery bodies that no
	// run refers to any more (their runs were deleted) and returns how
	// many. A run created with a reference to a body this deletes fails
	// with ErrNotFound rather than refer to nothing.
	DeleteUnusedDeliveries(ctx context.Context) (int, error)

	// The stores' other areas, each with its own contract suite: tokens
	// and audit (RunAuth), the UI's sessions (RunSessions), what steps
	// print (RunStepOutput), and everything listed and taken back by
	// state copy (RunExport), the notification outbox
	// (RunNotifications), the schedule pauses (RunSchedules) and the run
	// pauses (RunRunPauses), the runbook agents' sessions and
	// assignments (RunAgents).
	AuthStore
	SessionStore
	AgentStore
	NotificationStore
	ScheduleStore
	RunPauseStore
	StepOutput
	Exporter
	Importer

	Close() error
}

// Delivery is what CommitDelivery commits. When Key is a live dedup key
// nothing is written and the result is Duplicate with the key's value (nil
// when it has none). Otherwise, for each unit in order: a unit whose Claim
// is a live dedup key is skipped (its claim's value is returned in
// Earlier); any other unit claims Claim (when not empty, with ClaimValue
// attached) and creates Run with Events, as CreateRun does (a taken run ID
// fails the whole delivery with ErrExists). Last, Key is claimed and given
// the value Done returns. Claims are recorded with TTL, as Dedup records
// them. When a run is created and ID is set, Body is stored under ID, once
// for all the runs (which refer to it, see DeliveryRef); an ID already
// stored fails the delivery with ErrExists.
type Delivery struct {
	Key   string
	TTL   time.Duration
	Units []DeliveryUnit
	ID    string // the stored body's ID; empty: no body is stored
	Body  []byte
	// Done returns the value attached to Key, given the IDs of the runs
	// created and the values of the skipped units' claims (as in
	// DeliveryResult). It is called inside the transaction, possibly more
	// than once (the store may run a transaction again); it must be quick
	// and have no side effects.
	Done func(created []string, earlier [][]byte) []byte
}

// DeliveryUnit is one run a delivery may start.
type DeliveryUnit struct {
	Claim string // dedup key of the unit; empty: none
	// ClaimValue is attached to Claim when this unit claims it (nil: no
	// value), so a later delivery skipped for the claim can tell what
	// this one started.
	ClaimValue []byte
	// Run is committed as recorded: with an Owner, it is committed
	// already claimed by that replica (runner.Host.Prepare). A pending run
	// with an Owner and a ConcurrencyKey (engine.Engine.Prepare) may have
	// the key taken in its name by the commit, when it is free: a store
	// that does so (the PostgreSQL one) answers that run's AcquireLock of
	// the key yes without asking again; any other store leaves the key to
	// AcquireLock.
	Run    *Run
	Events []Event
}

// DeliveryResult is the outcome of CommitDelivery.
type DeliveryResult struct {
	Duplicate bool     // Key was live: nothing was written
	Value     []byte   // a duplicate's value (nil: none)
	Created   []string // IDs of the runs created, in unit order
	// Earlier holds, for each unit skipped for its live claim, in unit
	// order, the claim's value (nil: none).
	Earlier [][]byte
}
