package ui

import (
	"net/http"
	"net/url"

	"github.com/runbook/runbook/internal/api"
)

// notificationsData is the notifications page's: the outbox's history,
// filtered by status, a page at a time.
type notificationsData struct {
	Status   string
	Statuses []string
	List     api.NotificationList
	// Older is the link to the next page ("": this is the last).
	Older string
}

// notificationsPage lists the notifications, newest first, with their
// status, attempts and last error: a message that keeps failing is shown
// here, never dropped.
func (u *UI) notificationsPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := &notificationsData{Status: q.Get("status"), Statuses: []string{"pending", "failing", "sent"}}
	aq := url.Values{"limit": {"50"}}
	if d.Status != "" {
		aq.Set("status", d.Status)
	}
	if b := q.Get("before"); b != "" {
		aq.Set("before", b)
	}
	if err := u.get(r.Context(), s, "/api/v1/notifications?"+aq.Encode(), &d.List); err != nil {
		u.fail(w, r, s, err)
		return
	}
	if d.List.Next != "" {
		next := url.Values{"before": {d.List.Next}}
		if d.Status != "" {
			next.Set("status", d.Status)
		}
		d.Older = "/notifications?" + next.Encode()
	}
	u.render(w, r, http.StatusOK, "notifications", &view{Title: "Notifications", Nav: "notifications", session: s, Data: d})
}
