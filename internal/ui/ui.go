package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the UI.
type Options struct {
	// API is the server's handler of /api/v1, /healthz and /metrics; the
	// UI calls it in process as the signed-in session's Source (in the
	// request's context, see SourceOf). Required.
	API http.Handler
	// Identify returns who a token belongs to and what it may do, at
	// sign-in. Required.
	Identify IdentifyFunc
	// Recheck returns who a session's source is now: asked each minute, and
	// for a session read from the store that this process did not sign in
	// (after a restart, or on another replica). Nil: a session keeps the
	// identity of its sign-in and lives only in this process.
	Recheck RecheckFunc
	// Sessions is where sessions are kept (the state store), so that they
	// survive a restart and are shared by replicas.
	Sessions state.SessionStore
	// OIDC enables "Sign in with SSO" (nil: none).
	OIDC   *OIDCLogin
	Logger *slog.Logger
	// SessionIdle and SessionMax bound a session: it ends after SessionIdle
	// without a request (default 8 h) and SessionMax after login (default
	// 7 days).
	SessionIdle, SessionMax time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// UI is the web UI's handler.
type UI struct {
	o        Options
	log      *slog.Logger
	sessions *sessions
	mux      *http.ServeMux
	static   map[string]staticFile
	sizes    [len(pageNamesArray)]atomic.Int64 // the last size of each page, by pageNames index
}

// staticFile is an embedded asset and its content hash, the version in
// its URL.
type staticFile struct {
	data []byte
	hash string
	ct   string
}

// New builds the UI.
func New(o Options) (*UI, error) {
	if o.API == nil || o.Identify == nil || o.Sessions == nil {
		return nil, errors.New("ui: Options.API, Options.Identify and Options.Sessions are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = 8 * time.Hour
	}
	if o.SessionMax <= 0 {
		o.SessionMax = 7 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	pages() // a template that does not parse stops runbook serve as it starts
	u := &UI{o: o, log: o.Logger, sessions: newSessions(o.SessionIdle, o.SessionMax, o.Now, o.Sessions), static: map[string]staticFile{}}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		u.static[strings.TrimPrefix(p, "static/")] = staticFile{data: b, hash: hex.EncodeToString(sum[:6]), ct: contentType(p)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	u.routes()
	return u, nil
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

func (u *UI) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/runs", http.StatusFound)
	})
	m.HandleFunc("GET /login", u.loginPage)
	m.HandleFunc("POST /login", u.login)
	if u.o.OIDC != nil {
		m.HandleFunc("GET /login/oidc", u.oidcStart)
		m.HandleFunc("GET /login/oidc/callback", u.oidcCallback)
	}
	m.Handle("POST /logout", u.action(u.logout))
	m.HandleFunc("GET /ui/static/{file}", u.serveStatic)

	m.Handle("GET /runs", u.page(u.runsPage))
	m.Handle("GET /runs/{id}", u.page(u.runPage))
	m.Handle("GET /runs/{id}/live", u.stream(u.runLive))
	m.Handle("GET /live", u.stream(u.listsLive))
	m.Handle("GET /runs/{id}/output/{step}", u.page(u.downloadOutput))
	m.Handle("POST /runs/{id}/cancel", u.action(u.cancelRun))
	m.Handle("POST /runs/{id}/approve", u.action(u.approveRun))
	m.Handle("POST /runs/{id}/retry", u.action(u.retryRun))
	m.Handle("POST /runs/{id}/resume", u.action(u.resumeRun))
	m.Handle("POST /runs/{id}/rerun", u.action(u.rerunRun))
	m.Handle("GET /playbooks", u.page(u.playbooksPage))
	m.Handle("GET /history", u.page(u.historyPage))
	m.Handle("POST /playbooks/reload", u.action(u.reload))
	m.Handle("GET /playbooks/{name}", u.page(u.playbookPage))
	m.Handle("POST /playbooks/{name}/runs", u.action(u.startRun))
	m.Handle("POST /playbooks/{name}/pause", u.action(u.pausePlaybook))
	m.Handle("POST /playbooks/{name}/resume", u.action(u.resumePlaybook))
	m.Handle("GET /approvals", u.page(u.approvalsPage))
	m.Handle("GET /deliveries", u.page(u.deliveriesPage))
	m.Handle("GET /notifications", u.page(u.notificationsPage))
	m.Handle("GET /schedules", u.page(u.schedulesPage))
	m.Handle("POST /schedules/{name}/pause", u.action(u.scheduleAction("pause", PauseSchedules)))
	m.Handle("POST /schedules/{name}/resume", u.action(u.scheduleAction("resume", PauseSchedules)))
	m.Handle("POST /schedules/{name}/run", u.action(u.scheduleAction("run", StartRun)))
	m.Handle("POST /schedules/{name}/backfill", u.action(u.backfillSchedule))
	m.Handle("GET /agents", u.page(u.agentsPage))
	m.Handle("GET /health", u.page(u.healthPage))
	m.Handle("POST /health/drain", u.action(u.drainServer))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.render(w, r, http.StatusNotFound, "error", &view{Title: "Not found", session: u.current(r),
			Data: errorData{Message: "There is no page " + r.URL.Path + "."}})
	})
	u.mux = m
}

// ServeHTTP serves the UI with its security headers.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	u.mux.ServeHTTP(w, r)
}

func (u *UI) serveStatic(w http.ResponseWriter, r *http.Request) {
	f, ok := u.static[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.ct)
	if r.URL.Query().Get("v") == f.hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+f.hash+`"`)
	if r.Header.Get("If-None-Match") == `"`+f.hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(f.data)
}

// asset is the versioned URL of a static file.
func (u *UI) asset(name string) string {
	return "/ui/static/" + name + "?v=" + u.static[name].hash
}

// recheck is how often a session's identity is asked again, so that a
// change of roles or a revoked token shows within it.
const recheck = time.Minute

// current is the request's live session, or nil. A session whose source
// the API no longer takes ends.
func (u *UI) current(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	s, ok := u.sessions.get(r.Context(), c.Value)
	if !ok {
		return nil
	}
	known, ok := u.sessions.cachedIdentity(s.rec.Key)
	if ok && (u.o.Recheck == nil || u.o.Now().Sub(known.checked) < recheck) {
		s.ident = known.ident
		return s
	}
	if u.o.Recheck == nil {
		return nil // signed in by another process, which this one cannot check
	}
	ident, err := u.o.Recheck(r.Context(), s.source())
	switch {
	case errors.Is(err, ErrBadToken):
		u.sessions.remove(r.Context(), c.Value)
		return nil
	case err != nil && ok:
		s.ident = known.ident // cannot check now: keep what was known
		return s
	case err != nil:
		u.log.Warn("ui session: its identity cannot be checked now", "err", err)
		return nil
	}
	u.sessions.remember(s.rec.Key, ident, u.o.Now())
	s.ident = ident
	return s
}

// page wraps a GET page: without a session it sends the browser to /login
// and back.
func (u *UI) page(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := u.current(r)
		if s == nil {
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, s)
	})
}

// stream wraps an event stream: without a session it answers 401.
func (u *UI) stream(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := u.current(r)
		if s == nil {
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		h(w, r, s)
	})
}

// action wraps a POST: a session, a request from this site and the
// session's CSRF token are required.
func (u *UI) action(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := u.current(r)
		if s == nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if !sameOrigin(r) || !equalToken(r.PostFormValue("csrf"), s.csrf) {
			u.render(w, r, http.StatusForbidden, "error", &view{Title: "Refused", session: s,
				Data: errorData{Message: "This form is stale or came from another site (CSRF check). Reload the page and try again."}})
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, s)
	})
}

// permitted refuses, with a page saying so, an action the session may not
// do on playbook pb. The UI does not offer such actions; this holds for a
// form kept from before a change of permissions, or made by hand.
func (u *UI) permitted(w http.ResponseWriter, r *http.Request, s *session, a Action, pb string) bool {
	if s.identity().allows(a, pb) {
		return true
	}
	what := "do this"
	if pb != "" {
		what += " on playbook " + pb
	}
	u.render(w, r, http.StatusForbidden, "error", &view{Title: "Not allowed", session: s,
		Data: errorData{Message: "You may not " + what + " (" + string(a) + ")."}})
	return false
}

// runAction checks that the session may do a on the run in the path, and
// returns the run's ID.
func (u *UI) runAction(w http.ResponseWriter, r *http.Request, s *session, a Action) (string, bool) {
	id := r.PathValue("id")
	var run api.Run
	if err := u.get(r.Context(), s, "/api/v1/runs/"+url.PathEscape(id), &run); err != nil {
		u.fail(w, r, s, err)
		return "", false
	}
	return id, u.permitted(w, r, s, a, run.Playbook)
}
