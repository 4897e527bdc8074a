package state

import (
	"context"
	"time"
)

// Kind names one kind of record a store holds, as `runbook state copy`
// counts them.
type Kind string

// The kinds of record Export produces, in the order a copy reports them.
const (
	KindRun      Kind = "runs"
	KindStep     Kind = "steps"
	KindEvent    Kind = "events"
	KindIntent   Kind = "intents"
	KindApproval Kind = "approvals"
	KindDelivery Kind = "deliveries"
	KindCursor   Kind = "cursors"
	KindDedup    Kind = "dedup keys"
	KindToken    Kind = "tokens"
	KindAudit    Kind = "audit records"
	KindNotify   Kind = "notifications"
	KindPause    Kind = "schedule pauses"
	KindRunPause Kind = "run pauses"
)

// Kinds lists every Kind in report order.
var Kinds = []Kind{
	KindRun, KindStep, KindEvent, KindIntent, KindApproval,
	KindDelivery, KindCursor, KindDedup, KindToken, KindAudit, KindNotify, KindPause, KindRunPause,
}

// Record is one stored thing as Export produces it and Import takes it:
// exactly one of its pointer fields is set, the one Kind names. Records
// keep everything the store keeps: event and audit sequence numbers, a
// step's place in its run's order (its place among the run's step
// records), a dedup key's first-seen time, expiry and value.
type Record struct {
	Kind     Kind
	Run      *Run // with its playbook snapshot
	Step     *StepRecord
	Event    *RunEvent
	Intent   *Intent
	Approval *Approval
	Delivery *StoredDelivery
	Cursor   *Cursor
	Dedup    *DedupKey
	Token    *Token
	Audit    *AuditRecord
	Notify   *Notification
	Pause    *SchedulePause
	RunPause *RunPause
}

// RunEvent is an event of a run's log with its run.
type RunEvent struct {
	RunID string
	Event
}

// StoredDelivery is the body of a webhook delivery runs refer to
// (DeliveryRef).
type StoredDelivery struct {
	ID   string
	Body []byte
}

// Cursor is a value stored with PutCursor.
type Cursor struct {
	Key   string
	Value []byte
}

// DedupKey is a live dedup key: when it was first recorded, when it
// expires (zero: never) and the value DedupSet attached (nil: none).
type DedupKey struct {
	Key       string
	FirstSeen time.Time
	Expires   time.Time
	Value     []byte
}

// Exporter is a store that can list everything it holds, a part of
// Store; the contract suite is statetest.RunExport.
type Exporter interface {
	// Export calls fn for every record, in one consistent view of the
	// store, in an order Import accepts: each run (oldest first) followed
	// by its steps (in their order), events (by Seq), intents and
	// approvals; then deliveries, cursors, live dedup keys (expired ones
	// are not exported), tokens, audit records (by Seq) and the
	// notification outbox (oldest first, claims and all), and the
	// schedule pauses (by playbook and trigger). Locks are not
	// exported: a lock belongs to the process that holds it. An error from
	// fn ends the export and is returned.
	Export(ctx context.Context, fn func(Record) error) error
}

// Importer is a store that can take records as Export produced them (a
// part of Store),
// keeping what the store's normal methods would assign anew (event and
// audit numbers, a run's creation time, a dedup key's times).
type Importer interface {
	// Import writes recs in one transaction, all or none. A run's other
	// records come after the run, in this call or an earlier one. A run
	// ID already taken fails with ErrExists; Import is meant for a store
	// that holds no runs (it does not merge).
	Import(ctx context.Context, recs []Record) error
}
