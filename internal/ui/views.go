package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/runbook/runbook/internal/api"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// pageNames are the templates of templates/, one per page.
var pageNamesArray = [...]string{"login", "error", "runs", "run", "playbooks", "playbook", "approvals", "deliveries", "notifications", "schedules", "health", "history", "agents"}

var pageNames = pageNamesArray[:]

// pages are the parsed templates: each page with the layout and partials,
// parsed when the first UI is built (New), not in every runbook process.
var pages = sync.OnceValue(parsePages)

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.New(name).Funcs(funcs)
		out[name] = template.Must(t.ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html"))
	}
	return out
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string // the navigation entry to mark current
	Data  any

	session *session
	ui      *UI
	now     time.Time
}

// SignedIn reports whether there is a session.
func (v *view) SignedIn() bool { return v.session != nil }

// User is the name the page shows for the session.
func (v *view) User() string {
	if v.session == nil {
		return ""
	}
	return v.session.by()
}

// CSRF is the token every form of the page carries.
func (v *view) CSRF() string {
	if v.session == nil {
		return ""
	}
	return v.session.csrf
}

// Can reports whether the session may do action on playbook pb.
func (v *view) Can(action string, pb string) bool {
	return v.session != nil && v.session.identity().allows(Action(action), pb)
}

// CanAny reports whether the session may do action on some playbook.
func (v *view) CanAny(action string) bool {
	return v.session != nil && v.session.identity().allowsAny(Action(action))
}

// Asset is the versioned URL of a static file.
func (v *view) Asset(name string) string { return v.ui.asset(name) }

// Now is when the page was rendered.
func (v *view) Now() time.Time { return v.now }

// errorData is the error page's.
type errorData struct{ Message string }

// render writes a page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	v.ui, v.now = u, u.o.Now()
	var buf bytes.Buffer
	// The last size of this page: a page of a large run is megabytes,
	// and growing the buffer to it by doubling costs.
	size := &u.sizes[slices.Index(pageNames, name)]
	buf.Grow(int(size.Load()))
	if err := pages()[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		u.log.Error("render page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "the page failed to render; the server log says why", http.StatusInternalServerError)
		return
	}
	size.Store(int64(buf.Len()))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error of an API call as a page.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status := http.StatusInternalServerError
	msg := err.Error()
	if ae, ok := err.(*APIError); ok {
		status = ae.Status
		if status == http.StatusUnauthorized {
			// The API no longer takes the session's token (revoked): the
			// session ends.
			if c, cerr := r.Cookie(sessionCookie); cerr == nil {
				u.sessions.remove(r.Context(), c.Value)
			}
			setCookie(w, r, sessionCookie, "", -1)
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
	}
	u.render(w, r, status, "error", &view{Title: http.StatusText(status), session: s, Data: errorData{Message: msg}})
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

var funcs = template.FuncMap{
	"icon":      statusIcon,
	"ago":       ago,
	"abs":       absTime,
	"iso":       isoTime,
	"span":      span,
	"json":      prettyJSON,
	"scalar":    scalar,
	"trigger":   triggerText,
	"startedBy": startedBy,
	"cellTitle": cellTitle,
	"pathesc":   url.PathEscape,
	"queryesc":  url.QueryEscape,
	"sortedKeys": func(m map[string]any) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	},
	"has": func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	},
	"add":       func(a, b int) int { return a + b },
	"list":      func(s ...string) []string { return s },
	"pair":      func(v *view, x any) viewPair { return viewPair{V: v, X: x} },
	"at":        func(now, t time.Time) instant { return instant{Now: now, T: t} },
	"item":      func(r api.Run, a *approvalView) approvalItem { return approvalItem{Run: r, Approval: a} },
	"stepOf":    func(d *runData, s *stepView) stepPair { return stepPair{D: d, S: s} },
	"fieldKey":  func(prefix string, f fieldView) fieldView { f.Key = prefix + f.Name; return f },
	"parseTime": func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t },
	"f1":        func(f float64) string { return fmt.Sprintf("%.1f", f) },
}

// viewPair hands a partial the page's view and one value.
type viewPair struct {
	V *view
	X any
}

// instant is a time and the page's now, for the "when" partial.
type instant struct {
	Now, T time.Time
}

// stepPair is a step of a run page and the page.
type stepPair struct {
	D *runData
	S *stepView
}

// kvText shows an event's data as key=value pairs, sorted by key.
func kvText(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(scalar(m[k]))
	}
	return b.String()
}

// statusIcon is the symbol that goes with a status, so that it does not
// rest on colour alone.
func statusIcon(status any) string {
	switch fmt.Sprint(status) {
	case "succeeded", "accepted", "ok", "sent":
		return "✓"
	case "failed", "refused", "failing":
		return "✗"
	case "running":
		return "▶"
	case "waiting":
		return "‖"
	case "pending", "queued":
		return "○"
	case "cancelled":
		return "⊘"
	case "skipped", "duplicate":
		return "↷"
	case "interrupted":
		return "⚠"
	}
	return "•"
}

func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func absTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago is t relative to now, in words.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
		return "in " + roughDuration(d)
	}
	if d < 10*time.Second {
		return "just now"
	}
	return roughDuration(d) + suffix
}

func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// fmtDuration is a duration for people: 0.26s, 2m 03s, 1h 02m.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(math.Mod(d.Seconds(), 60)))
	}
	return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(math.Mod(d.Minutes(), 60)))
}

// span is the duration from start to end, or to now when end is zero;
// empty when start is zero.
func span(now, start, end time.Time) string {
	if start.IsZero() {
		return ""
	}
	if end.IsZero() {
		end = now
	}
	return fmtDuration(end.Sub(start))
}

func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// scalar shows a value on one line: a string as it is, the rest as JSON.
func scalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// triggerText says what started a run: api, schedule 2026-11-22T03:00,
// webhook sms UNSUBSCRIBE...
func triggerText(t map[string]any) string {
	typ, _ := t["type"].(string)
	if typ == "" {
		return "cli"
	}
	parts := []string{typ}
	for _, k := range []string{"slot", "route", "event", "delivery", "hooksId"} {
		if v, ok := t[k].(string); ok && v != "" {
			parts = append(parts, v)
		}
	}
	if v, ok := t["via"].(string); ok && v != "" {
		parts = append(parts, "("+v+")") // run now, backfill
	}
	return strings.Join(parts, " ")
}

// startedBy is who started a run, when the trigger says.
func startedBy(t map[string]any) string {
	for _, k := range []string{"rerun_by", "retried_by", "by", "user", "identity"} {
		if v, ok := t[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}
