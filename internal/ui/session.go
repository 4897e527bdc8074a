package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The cookies of the UI. Both are HttpOnly and SameSite=Strict.
const (
	sessionCookie = "runbook_session"
	// loginCookie holds the CSRF token of the login form, before there is
	// a session (double submit).
	loginCookie = "runbook_login"
)

// maxSessions bounds the sessions kept; the least recently used goes.
const maxSessions = 10000

// session is one signed-in browser. The API token stays here, never in
// the browser.
type session struct {
	token   string
	ident   atomic.Pointer[Identity] // replaced when asked again (see UI.current)
	name    string                   // who the user said they are, when the token names no one
	csrf    string
	created time.Time
	seen    time.Time
	checked time.Time // when the identity was last asked of Options.Identify
}

// identity is who the session's token belongs to.
func (s *session) identity() Identity { return *s.ident.Load() }

// by is the name recorded as who answers or cancels.
func (s *session) by() string {
	switch id := s.identity(); {
	case id.Name != "":
		return id.Name
	case s.name != "":
		return s.name
	}
	return "ui"
}

// sessions is the in-memory session table, keyed by the SHA-256 of the
// cookie's value.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu sync.Mutex
	m  map[string]*session
}

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{idle: idle, max: max, now: now, m: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return base64.RawURLEncoding.EncodeToString(b)
}

func keyOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// create adds a session and returns the cookie value that finds it.
func (ss *sessions) create(token string, ident Identity, name string) (string, *session) {
	id := randomToken()
	now := ss.now()
	s := &session{token: token, name: name, csrf: randomToken(), created: now, seen: now, checked: now}
	s.ident.Store(&ident)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions {
		ss.evictLocked()
	}
	ss.m[keyOf(id)] = s
	return id, s
}

// evictLocked drops expired sessions, then the least recently seen.
func (ss *sessions) evictLocked() {
	now := ss.now()
	var oldestKey string
	var oldest time.Time
	for k, s := range ss.m {
		if ss.expired(s, now) {
			delete(ss.m, k)
			continue
		}
		if oldestKey == "" || s.seen.Before(oldest) {
			oldestKey, oldest = k, s.seen
		}
	}
	if len(ss.m) >= maxSessions {
		delete(ss.m, oldestKey)
	}
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.seen) > ss.idle || now.Sub(s.created) > ss.max
}

// get returns the live session of a cookie value, or nil.
func (ss *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	k := keyOf(id)
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[k]
	if s == nil {
		return nil
	}
	if ss.expired(s, now) {
		delete(ss.m, k)
		return nil
	}
	s.seen = now
	return s
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, keyOf(id))
}

// setCookie writes an HttpOnly, SameSite=Strict cookie, Secure when the
// browser came over TLS (to this server, or to a proxy in front that says
// so); maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure})
}

// stale reports whether the session's identity is older than every and
// marks it checked when it is: the caller asks for it again.
func (ss *sessions) stale(s *session, every time.Duration) bool {
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if now.Sub(s.checked) < every {
		return false
	}
	s.checked = now
	return true
}

// update replaces the session's identity.
func (ss *sessions) update(s *session, ident Identity) { s.ident.Store(&ident) }

// sameOrigin refuses a state-changing request another site started: the
// browser's Sec-Fetch-Site, else its Origin, must be this server.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "same-site", "cross-site":
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return origin == ""
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// equalToken compares two tokens in constant time.
func equalToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// safeNext is where to go after login: a path of this site, else /runs.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "/login") {
		return "/runs"
	}
	return next
}
