package identity_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
)

func start(t *testing.T) *sim.Server {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &out), string(b))
	}
	return resp.StatusCode, out
}

func authBody(tenant, user, password string) string {
	b, _ := json.Marshal(map[string]any{"auth": map[string]any{
		"tenantId": tenant, "passwordCredentials": map[string]any{"username": user, "password": password},
	}})
	return string(b)
}

func TestTokensAreIssuedForTheConnectionCredentialsAndExpireOnTheSimClock(t *testing.T) {
	s := start(t)
	conn := s.Connections()["identity"]
	require.Equal(t, s.URL("identity"), conn["identity_url"])
	code, out := post(t, s.URL("identity")+"/v2.0/tokens",
		authBody(conn["tenant_id"].(string), conn["username"].(string), conn["password"].(string)))
	require.Equal(t, 200, code, out)
	tok := out["access"].(map[string]any)["token"].(map[string]any)
	id := tok["id"].(string)
	exp, err := time.Parse(time.RFC3339, tok["expires"].(string))
	require.NoError(t, err)
	assert.InDelta(t, 12*time.Hour, exp.Sub(s.Clock.Now()), float64(time.Minute))
	assert.Equal(t, conn["tenant_id"], tok["tenant"].(map[string]any)["id"])

	store := s.Service("identity").(*identity.Service).Store()
	assert.True(t, store.Valid(id))
	assert.False(t, store.Valid("forged"))
	s.Clock.Advance(12*time.Hour + time.Second)
	assert.False(t, store.Valid(id), "the token expired on the simulated clock")
}

func TestWrongCredentialsAnswer401WithTheKeystoneBody(t *testing.T) {
	s := start(t)
	conn := s.Connections()["identity"]
	code, out := post(t, s.URL("identity")+"/v2.0/tokens",
		authBody(conn["tenant_id"].(string), conn["username"].(string), "wrong"))
	assert.Equal(t, 401, code)
	e := out["error"].(map[string]any)
	assert.Equal(t, float64(401), e["code"])
	assert.Equal(t, "Unauthorized", e["title"])

	code, _ = post(t, s.URL("identity")+"/v2.0/tokens", `{"auth":{}}`)
	assert.Equal(t, 400, code, "a body without credentials is malformed")
	code, _ = post(t, s.URL("identity")+"/v2.0/tokens", `not json`)
	assert.Equal(t, 400, code)
}

func TestAdminRoutesShortenTheLifetimeAndRevokeTokens(t *testing.T) {
	s := start(t)
	conn := s.Connections()["identity"]
	body := authBody(conn["tenant_id"].(string), conn["username"].(string), conn["password"].(string))
	code, _ := post(t, s.URL("identity")+"/_admin/lifetime", `{"lifetime":"30m"}`)
	require.Equal(t, 204, code)
	_, out := post(t, s.URL("identity")+"/v2.0/tokens", body)
	tok := out["access"].(map[string]any)["token"].(map[string]any)
	exp, err := time.Parse(time.RFC3339, tok["expires"].(string))
	require.NoError(t, err)
	assert.InDelta(t, 30*time.Minute, exp.Sub(s.Clock.Now()), float64(time.Minute))

	store := s.Service("identity").(*identity.Service).Store()
	require.True(t, store.Valid(tok["id"].(string)))
	code, _ = post(t, s.URL("identity")+"/_admin/revoke", ``)
	require.Equal(t, 204, code)
	assert.False(t, store.Valid(tok["id"].(string)))
}
