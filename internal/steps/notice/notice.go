package notice

import (
	"strings"
	"time"
)

// Notice is a notice in the shape every step here returns, whatever form
// the help center used (displayDt as yyyy.MM.dd or yyyyMMddHHmmss, tagStr
// absent or comma-separated, isNew as text or boolean).
type Notice struct {
	ID         int64
	Title      string
	CategoryID int64
	Category   string
	Pinned     bool
	DisplayAt  time.Time
	UpdatedAt  time.Time
	Tags       []string
	IsNew      bool
	URL        string
	Content    string
}

// stamp is the time the digest orders and watermarks by: the update time
// in Unix milliseconds, else the display time.
func (n Notice) stamp() int64 {
	switch {
	case !n.UpdatedAt.IsZero():
		return n.UpdatedAt.UnixMilli()
	case !n.DisplayAt.IsZero():
		return n.DisplayAt.UnixMilli()
	}
	return 0
}

// Shown is the date a digest shows: the display date, else the update time.
func (n Notice) Shown() time.Time {
	if !n.DisplayAt.IsZero() {
		return n.DisplayAt
	}
	return n.UpdatedAt
}

// Map is the notice as a step output.
func (n Notice) Map() map[string]any {
	tags := make([]any, len(n.Tags))
	for i, t := range n.Tags {
		tags[i] = t
	}
	m := map[string]any{
		"id":          n.ID,
		"title":       n.Title,
		"category_id": n.CategoryID,
		"category":    n.Category,
		"pinned":      n.Pinned,
		"display_at":  rfc3339(n.DisplayAt),
		"updated_at":  rfc3339(n.UpdatedAt),
		"tags":        tags,
		"is_new":      n.IsNew,
	}
	if n.URL != "" {
		m["url"] = n.URL
	}
	return m
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// noticeURL fills the connection's notice_url pattern ("{id}" is replaced),
// or returns "" without one.
func noticeURL(pattern string, id int64) string {
	if pattern == "" {
		return ""
	}
	return strings.ReplaceAll(pattern, "{id}", itoa(id))
}
