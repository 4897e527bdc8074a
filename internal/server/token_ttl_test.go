package server_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
)

// clock is a settable clock for the server's token expiry.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestATokenPastItsTTLIsRefused: a token made with a TTL works until it
// expires, the list shows its expiry and its last use, and afterwards the
// API refuses it with 401 naming the expiry, the refusal is audited, and
// the UI session signed in with it ends.
func TestATokenPastItsTTLIsRefused(t *testing.T) {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, func(o *server.Options) { o.Auth.Now = c.now })

	r := e.api("POST", "/api/v1/tokens", map[string]any{"name": "ci", "roles": []string{"viewer"}, "ttl": "90d"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	created := r.json(t)
	secret := created["token"].(string)
	expires, err := time.Parse(time.RFC3339Nano, created["expires_at"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(90*24*time.Hour), expires, time.Minute)

	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/runs", secret, nil).status)
	b := e.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(secret))
	b.page("/runs")

	var listed map[string]any
	require.Eventually(t, func() bool {
		for _, tk := range e.api("GET", "/api/v1/tokens", nil).json(t)["tokens"].([]any) {
			if m := tk.(map[string]any); m["name"] == "ci" && m["last_used_at"] != nil {
				listed = m
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the token's last use is not listed")
	assert.Equal(t, created["expires_at"], listed["expires_at"])

	c.advance(90*24*time.Hour + time.Second)
	r = e.do("GET", "/api/v1/runs", secret, nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Contains(t, r.json(t)["error"], "token ci expired at "+expires.UTC().Format(time.RFC3339))

	status, _ := b.send(http.MethodGet, "/runs", nil)
	assert.Equal(t, http.StatusSeeOther, status, "the UI session outlived its token")

	var found bool
	for _, rec := range e.api("GET", "/api/v1/audit", nil).json(t)["records"].([]any) {
		m := rec.(map[string]any)
		if m["action"] == "token.expired" && m["target"] == "token:ci" && m["result"] == "unauthorized" {
			found = true
		}
	}
	assert.True(t, found, "the refusal of the expired token is not audited")

	r = e.api("POST", "/api/v1/tokens", map[string]any{"name": "bad", "roles": []string{"viewer"}, "ttl": "soon"})
	assert.Equal(t, http.StatusBadRequest, r.status)
}
