package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/runbook/runbook/internal/state"
)

// Notification is one message of the notification outbox as GET
// /api/v1/notifications lists it: the event, where it goes, and how its
// sending went.
type Notification struct {
	Key       string `json:"key"` // the idempotency key, a signed webhook's webhook-id
	Event     string `json:"event"`
	Rule      string `json:"rule"`
	Channel   string `json:"channel"`
	RunID     string `json:"run_id,omitempty"`
	Playbook  string `json:"playbook,omitempty"`
	Subject   string `json:"subject"`
	Text      string `json:"text"`
	Status    string `json:"status"` // pending, sent, failing
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
	CreatedAt string `json:"created_at"`
	// NextAttemptAt is when a message not sent is tried next.
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	SentAt        string `json:"sent_at,omitempty"`
}

// NotificationList answers GET /api/v1/notifications: newest first.
type NotificationList struct {
	Notifications []Notification `json:"notifications"`
	// Next is the value of `before` that lists the following page.
	Next string `json:"next,omitempty"`
}

// NotificationQuery is the query of GET /api/v1/notifications: status
// (pending, sent, failing; comma separated or repeated), run, limit
// (1..MaxRunLimit, default DefaultRunLimit) and before (a page's next).
func NotificationQuery(q url.Values) (state.NotificationFilter, error) {
	f := state.NotificationFilter{RunID: q.Get("run"), Limit: DefaultRunLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRunLimit {
			return f, fmt.Errorf("limit must be an integer in 1..%d", MaxRunLimit)
		}
		f.Limit = n
	}
	known := []state.NotificationStatus{state.NotifyPending, state.NotifySent, state.NotifyFailing}
	for _, s := range listParam(q["status"]) {
		st := state.NotificationStatus(s)
		if !slices.Contains(known, st) {
			return f, fmt.Errorf("status %q is not pending, sent or failing", s)
		}
		f.Status = append(f.Status, st)
	}
	if v := q.Get("before"); v != "" {
		c, err := state.ParseRunCursor(v)
		if err != nil {
			return f, err
		}
		f.Before = c
	}
	return f, nil
}
