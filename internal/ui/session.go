package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// The cookies of the UI. Both are HttpOnly and SameSite=Strict.
const (
	sessionCookie = "runbook_session"
	// loginCookie holds the CSRF token of the login form, before there is
	// a session (double submit).
	loginCookie = "runbook_login"
)

// maxSessions bounds the identities cached in memory.
const maxSessions = 10000

// seenEvery is how often a session's last request is written to the store.
const seenEvery = time.Minute

// session is one signed-in browser, as one request sees it: its stored
// record (no secret) and who it is.
type session struct {
	rec   state.Session
	ident Identity
	csrf  string // derived from the cookie's session ID, never stored
}

// identity is who the session belongs to.
func (s *session) identity() Identity { return s.ident }

// source is what the session's identity is checked against.
func (s *session) source() Source {
	return Source{Kind: s.rec.Kind, TokenHash: s.rec.TokenHash, Name: s.rec.Name, Roles: s.rec.Roles}
}

// by is the name recorded as who answers or cancels.
func (s *session) by() string {
	switch id := s.identity(); {
	case id.Name != "":
		return id.Name
	case s.rec.Name != "":
		return s.rec.Name
	}
	return "ui"
}

// cached is an identity the UI asked for, and when.
type cached struct {
	ident   Identity
	checked time.Time
}

// sessions are the sessions of the state store, with the
// identity each was last given, cached for recheck.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time
	store     state.SessionStore

	mu     sync.Mutex
	idents map[string]cached // by session key
	pruned time.Time
}

func newSessions(idle, max time.Duration, now func() time.Time, store state.SessionStore) *sessions {
	return &sessions{idle: idle, max: max, now: now, store: store, idents: map[string]cached{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return base64.RawURLEncoding.EncodeToString(b)
}

// keyOf is the SHA-256 (hex) of a session ID or a token.
func keyOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// csrfOf is the CSRF token of a session ID: derived, so never stored, and
// it does not reveal the ID.
func csrfOf(id string) string {
	sum := sha256.Sum256([]byte("runbook-ui-csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// create stores a session of src and returns the cookie value that finds
// it.
func (ss *sessions) create(ctx context.Context, src Source, ident Identity) (string, error) {
	id := randomToken()
	now := ss.now()
	rec := state.Session{Key: keyOf(id), Kind: src.Kind, TokenHash: src.TokenHash, Name: src.Name,
		Roles: src.Roles, Created: now, Seen: now}
	rec.Expires = ss.expiry(rec, now)
	if err := ss.store.PutSession(ctx, rec); err != nil {
		return "", err
	}
	ss.remember(rec.Key, ident, now)
	ss.prune(ctx, now)
	return id, nil
}

// expiry is when rec ends unless seen again after now.
func (ss *sessions) expiry(rec state.Session, now time.Time) time.Time {
	idle, max := now.Add(ss.idle), rec.Created.Add(ss.max)
	if max.Before(idle) {
		return max
	}
	return idle
}

// prune deletes the expired sessions of the store, at most hourly.
func (ss *sessions) prune(ctx context.Context, now time.Time) {
	ss.mu.Lock()
	due := now.Sub(ss.pruned) >= time.Hour
	if due {
		ss.pruned = now
	}
	ss.mu.Unlock()
	if due {
		_, _ = ss.store.PruneSessions(context.WithoutCancel(ctx), now)
	}
}

func (ss *sessions) remember(key string, ident Identity, now time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.idents) >= maxSessions {
		for k := range ss.idents { // drop any one: it is asked again when needed
			delete(ss.idents, k)
			break
		}
	}
	ss.idents[key] = cached{ident: ident, checked: now}
}

func (ss *sessions) cachedIdentity(key string) (cached, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	c, ok := ss.idents[key]
	return c, ok
}

// get returns the live stored session of a cookie value (without its
// identity yet), or false. An expired one is deleted.
func (ss *sessions) get(ctx context.Context, id string) (*session, bool) {
	if id == "" {
		return nil, false
	}
	rec, err := ss.store.Session(ctx, keyOf(id))
	if err != nil {
		return nil, false
	}
	now := ss.now()
	if !now.Before(rec.Expires) || now.Sub(rec.Created) > ss.max {
		ss.remove(ctx, id)
		return nil, false
	}
	if now.Sub(rec.Seen) >= seenEvery {
		rec.Seen = now
		rec.Expires = ss.expiry(rec, now)
		_ = ss.store.PutSession(context.WithoutCancel(ctx), rec) // a failed write only shortens the session
	}
	return &session{rec: rec, csrf: csrfOf(id)}, true
}

func (ss *sessions) remove(ctx context.Context, id string) {
	key := keyOf(id)
	_ = ss.store.DeleteSession(context.WithoutCancel(ctx), key)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.idents, key)
}

// setCookie writes an HttpOnly, SameSite=Strict cookie, Secure when the
// browser came over TLS (to this server, or to a proxy in front that says
// so); maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure})
}

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
