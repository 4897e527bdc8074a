package server

import (
	"context"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
)

// NotifyOptions are the notifications of the config (docs/config.md):
// the rules and the channels built from it, with their secrets resolved.
type NotifyOptions struct {
	Rules    []config.Rule
	Channels map[string]notify.Channel
	// Backoff, MaxBackoff and SendTimeout are notifications.backoff,
	// max_backoff and send_timeout (0: the config's defaults).
	Backoff, MaxBackoff, SendTimeout time.Duration
	// PublicURL is the base of the run links (server.public_url; "": the
	// server's own URL).
	PublicURL string
	// Sweep is how often the store is swept for events nobody told
	// (default 15 s).
	Sweep time.Duration
}

// notifications are the server's notifier, sender and watcher; nil
// fields when the config has no rules.
type notifications struct {
	notifier *notify.Notifier
	sender   *notify.Sender
	watcher  *notify.Watcher
}

// newNotifications builds the notifications of o. Without rules there is
// no watcher (nothing is enqueued) but the sender still sends what is
// queued.
func (s *Server) newNotifications(o Options, redactor notify.Redactor) {
	n := o.Notify
	if n.Backoff <= 0 {
		n.Backoff = config.DefaultNotifyBackoff
	}
	if n.MaxBackoff <= 0 {
		n.MaxBackoff = config.DefaultNotifyMaxBackoff
	}
	if n.SendTimeout <= 0 {
		n.SendTimeout = config.DefaultNotifySendTimeout
	}
	if redactor == nil {
		redactor = secrets.NewRedactor()
	}
	s.notify.sender = &notify.Sender{
		Store: s.store, Channels: n.Channels, Claimer: s.eng.Process(),
		Backoff: n.Backoff, MaxBackoff: n.MaxBackoff, SendTimeout: n.SendTimeout, Log: s.log,
	}
	if len(n.Rules) == 0 {
		return
	}
	s.notify.notifier = &notify.Notifier{
		Rules: n.Rules, Store: s.store, Redactor: redactor, PublicURL: n.PublicURL,
		Labels: s.labels, Wake: s.notify.sender.Wake,
	}
	s.notify.watcher = &notify.Watcher{Notifier: s.notify.notifier, Runs: s.store, Log: s.log, Sweep: n.Sweep}
}

// labels returns the labels of the playbook named name.
func (s *Server) labels(name string) map[string]string {
	if pb := s.cat.get(name); pb != nil {
		return pb.Labels
	}
	return nil
}

// runNotifications sends and watches until ctx ends.
func (s *Server) runNotifications(ctx context.Context, goFn func(func())) {
	if s.notify.notifier != nil && s.notify.notifier.PublicURL == "" {
		s.notify.notifier.PublicURL = s.url()
	}
	goFn(func() { s.notify.sender.Run(ctx) })
	if s.notify.watcher != nil {
		goFn(func() { s.notify.watcher.Run(ctx) })
	}
}

// observeNotify tells the watcher of an event the engine recorded.
func (s *Server) observeNotify(runID string, ev state.Event) {
	if s.notify.watcher != nil {
		s.notify.watcher.Observe(runID, ev)
	}
}

// refusedDelivery counts a webhook delivery the intake refused.
func (s *Server) refusedDelivery(route string, status int) {
	if s.notify.watcher != nil && route != "" && status/100 == 4 && status != http.StatusNotFound {
		s.notify.watcher.Refused(route)
	}
}

// slotDropped tells the watcher of a schedule slot not fired.
func (s *Server) slotDropped(playbook string, trigger int, slot time.Time) {
	if s.notify.watcher != nil {
		s.notify.watcher.SlotDropped(playbook, trigger, slot)
	}
}

// listNotifications answers GET /api/v1/notifications: the history of
// notifications, newest first, paged as runs are.
func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) {
	f, err := api.NotificationQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, err.Error())
		return
	}
	limit := f.Limit
	f.Limit++
	ns, err := s.store.ListNotifications(r.Context(), f)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := api.NotificationList{Notifications: []api.Notification{}}
	for i, n := range ns {
		if i == limit {
			last := ns[limit-1]
			out.Next = state.RunCursor{CreatedAt: last.CreatedAt, ID: last.Key}.String()
			break
		}
		if n.Playbook != "" && !visible(r, n.Playbook) {
			continue
		}
		out.Notifications = append(out.Notifications, notificationView(n))
	}
	writeJSON(w, http.StatusOK, out)
}

func notificationView(n state.Notification) api.Notification {
	v := api.Notification{Key: n.Key, Event: n.Event, Rule: n.Rule, Channel: n.Channel, RunID: n.RunID, Playbook: n.Playbook,
		Subject: n.Subject, Text: n.Text, Status: string(n.Status), Attempts: n.Attempts, LastError: n.LastError,
		CreatedAt: n.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if !n.DueAt.IsZero() && n.Status != state.NotifySent {
		v.NextAttemptAt = n.DueAt.UTC().Format(time.RFC3339Nano)
	}
	if !n.SentAt.IsZero() {
		v.SentAt = n.SentAt.UTC().Format(time.RFC3339Nano)
	}
	return v
}
