package state

import (
	"context"
	"errors"
	"time"
)

// NotificationStatus is where a message of the notification outbox is.
type NotificationStatus string

const (
	// NotifyPending: not sent yet, no attempt failed.
	NotifyPending NotificationStatus = "pending"
	// NotifySent: the channel took the message.
	NotifySent NotificationStatus = "sent"
	// NotifyFailing: the last attempt failed; another is due at DueAt.
	// A failing message is tried again with backoff for as long as it
	// fails: it is never dropped.
	NotifyFailing NotificationStatus = "failing"
)

// Notification is one message of the notification outbox: one event
// sent to one channel. Key, the event's key and the channel's name
// ("run.failed/RUN@ops-chat"), is unique: whichever replicas observe an
// event, it is enqueued once per channel. The texts are redacted by the
// caller before they are enqueued.
type Notification struct {
	Key      string `json:"key"`
	Event    string `json:"event"` // run.failed, approval.overdue, ...
	Rule     string `json:"rule"`  // the first rule that routed it here
	Channel  string `json:"channel"`
	RunID    string `json:"run_id,omitempty"`
	Playbook string `json:"playbook,omitempty"`
	// Subject is the one-line summary; Text the message in plain text;
	// Data the event's fields as a signed webhook sends them.
	Subject string         `json:"subject"`
	Text    string         `json:"text"`
	Data    map[string]any `json:"data,omitempty"`

	Status    NotificationStatus `json:"status"`
	Attempts  int                `json:"attempts"`
	LastError string             `json:"last_error,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	// DueAt is when the message may next be taken by a sender: its next
	// attempt, or the end of a sender's claim on it (zero once sent).
	DueAt     time.Time `json:"due_at,omitzero"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	SentAt    time.Time `json:"sent_at,omitzero"`
}

// NotificationFilter selects messages for ListNotifications, newest
// first. Zero fields match everything.
type NotificationFilter struct {
	Status []NotificationStatus
	RunID  string
	// Before keeps the messages after this position (CreatedAt, Key as
	// the cursor's ID) in the listing: keyset paging as for runs.
	Before *RunCursor
	Limit  int // 0: no limit
}

// Attempt is the outcome of one attempt to send a claimed message:
// sent, or failed with Error and tried again RetryIn from now.
type Attempt struct {
	Sent    bool
	Error   string
	RetryIn time.Duration
}

// ErrClaimLost refuses RecordAttempt by a sender whose claim on the
// message was taken by another sender after it lapsed, or whose message
// was sent meanwhile: the other sender's outcome stands.
var ErrClaimLost = errors.New("the claim on the notification was lost")

// NotificationStore is the notification outbox, a part of Store; the
// contract suite is statetest.RunNotifications. Times are the store's
// clock (the Now of its options).
type NotificationStore interface {
	// EnqueueNotifications inserts each message whose Key is absent, in
	// one transaction, pending and due now, and returns the keys it
	// inserted; a message whose Key exists is left as it is.
	EnqueueNotifications(ctx context.Context, ns []Notification) ([]string, error)
	// ClaimNotifications takes up to limit messages that are due (not
	// sent, DueAt passed: a message never tried, one whose retry is due,
	// or one whose claim lapsed) for claimer until lease from now, oldest
	// due first, and returns them. Senders claiming at once get
	// different messages.
	ClaimNotifications(ctx context.Context, claimer string, limit int, lease time.Duration) ([]Notification, error)
	// RecordAttempt records the outcome of claimer's attempt on message
	// key: sent, or failing with the error and due again after RetryIn.
	// It counts the attempt. A claim another sender took meanwhile, or a
	// message already sent, is ErrClaimLost; an unknown key ErrNotFound.
	RecordAttempt(ctx context.Context, key, claimer string, a Attempt) error
	// ListNotifications lists messages newest first (CreatedAt, then Key
	// descending).
	ListNotifications(ctx context.Context, f NotificationFilter) ([]Notification, error)
	// GetNotification returns the message of key (ErrNotFound).
	GetNotification(ctx context.Context, key string) (*Notification, error)
	// PruneNotifications deletes the messages sent before before and
	// returns how many; messages not sent are never deleted.
	PruneNotifications(ctx context.Context, before time.Time) (int, error)
}
