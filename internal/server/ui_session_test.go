package server_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// sessionCookie returns the browser's session cookie for the server.
func (b *browser) sessionCookie() string {
	b.t.Helper()
	u, err := url.Parse(b.base)
	require.NoError(b.t, err)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "runbook_session" {
			return c.Value
		}
	}
	return ""
}

// setSession puts a session cookie value in the browser's jar.
func (b *browser) setSession(v string) {
	u, err := url.Parse(b.base)
	require.NoError(b.t, err)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "runbook_session", Value: v, Path: "/"}})
}

// editSession changes the stored session of a cookie value, the server
// stopped.
func editSession(t *testing.T, statePath, cookie string, f func(*state.Session)) {
	t.Helper()
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close()) }()
	ctx := context.Background()
	s, err := store.Session(ctx, auth.HashToken(cookie))
	require.NoError(t, err, "the session is stored under the SHA-256 of its ID")
	assert.Equal(t, auth.HashToken(people["bob"].token), s.TokenHash, "the session keeps the token's hash")
	f(&s)
	require.NoError(t, store.PutSession(ctx, s))
}

// A session is kept in the state store: it survives a restart of the
// server, sign-out deletes it everywhere, and an expired one is refused.
func TestAUISessionSurvivesARestart(t *testing.T) {
	dir, statePath := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	e := start(t, dir, statePath, map[string]string{"gate.yaml": approvalPlaybook}, withPeople)
	b := e.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(people["bob"].token))
	assert.Contains(t, b.page("/runs"), "bob")
	cookie := b.sessionCookie()
	require.NotEmpty(t, cookie)
	e.stop()
	editSession(t, statePath, cookie, func(*state.Session) {})

	e = start(t, dir, statePath, nil, withPeople)
	b.base = e.url
	assert.Contains(t, b.page("/runs"), "bob", "the cookie of before the restart still signs in")

	t.Run("sign-out deletes the session from the store", func(t *testing.T) {
		_, page := b.send(http.MethodGet, "/runs", nil)
		m := csrfValue.FindStringSubmatch(page)
		require.NotNil(t, m)
		status, _ := b.send(http.MethodPost, "/logout", url.Values{"csrf": {m[1]}})
		require.Equal(t, http.StatusSeeOther, status)
		b.setSession(cookie) // a copy of the cookie kept from before
		status, _ = b.send(http.MethodGet, "/runs", nil)
		assert.Equal(t, http.StatusSeeOther, status, "a signed-out session is refused")
	})

	t.Run("an expired session is refused and deleted", func(t *testing.T) {
		b2 := e.browser(t)
		require.Equal(t, http.StatusSeeOther, b2.signIn(people["bob"].token))
		old := b2.sessionCookie()
		e.stop()
		editSession(t, statePath, old, func(s *state.Session) { s.Expires = time.Now().Add(-time.Second) })
		e = start(t, dir, statePath, nil, withPeople)
		b2.base = e.url
		status, _ := b2.send(http.MethodGet, "/runs", nil)
		assert.Equal(t, http.StatusSeeOther, status, "an expired session is refused")
		e.stop()
		store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second})
		require.NoError(t, err)
		_, err = store.Session(context.Background(), auth.HashToken(old))
		assert.ErrorIs(t, err, state.ErrNotFound, "the expired session is deleted")
		require.NoError(t, store.Close())
	})
}
