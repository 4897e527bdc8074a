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
	_ "github.com/runbook/runbook/internal/sim/nks"
	_ "github.com/runbook/runbook/internal/sim/objectstorage"
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

func TestATokenIsIssuedAtTokensWithATrailingSlashToo(t *testing.T) {
	s := start(t)
	conn := s.Connections()["identity"]
	code, out := post(t, s.URL("identity")+"/v2.0/tokens/",
		authBody(conn["tenant_id"].(string), conn["username"].(string), conn["password"].(string)))
	require.Equal(t, 200, code, out)
	assert.NotEmpty(t, out["access"].(map[string]any)["token"].(map[string]any)["id"])
}

// catalogURL returns the public URL of a catalog entry's KR1 endpoint.
func catalogURL(t *testing.T, access map[string]any, typ string) string {
	t.Helper()
	for _, e := range access["serviceCatalog"].([]any) {
		entry := e.(map[string]any)
		if entry["type"] != typ {
			continue
		}
		ep := entry["endpoints"].([]any)[0].(map[string]any)
		assert.Equal(t, "KR1", ep["region"])
		return ep["publicURL"].(string)
	}
	t.Fatalf("no %s entry in the catalog", typ)
	return ""
}

// Public clients (python-magnumclient through a keystoneauth session,
// gophercloud) join "clusters" to the container-infra endpoint: Magnum's
// catalog convention is a versioned URL.
func TestTheCatalogListsVersionedEndpointsOfTheServicesRunningBeside(t *testing.T) {
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks", "objectstorage"}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	conn := s.Connections()["identity"]
	code, out := post(t, s.URL("identity")+"/v2.0/tokens",
		authBody(conn["tenant_id"].(string), conn["username"].(string), conn["password"].(string)))
	require.Equal(t, 200, code, out)
	access := out["access"].(map[string]any)
	assert.Equal(t, s.URL("nks")+"/v1", catalogURL(t, access, "container-infra"))
	assert.Equal(t, s.URL("nks"), catalogURL(t, access, "kubernetes"), "the type name NHN Cloud's guide gives, unversioned")
	assert.Equal(t, s.URL("objectstorage")+"/v1/AUTH_"+conn["tenant_id"].(string), catalogURL(t, access, "object-store"))
	assert.Equal(t, s.URL("identity")+"/v2.0", catalogURL(t, access, "identity"))
	for _, e := range access["serviceCatalog"].([]any) {
		assert.NotEqual(t, "network", e.(map[string]any)["type"], "a service that is not running is not listed")
	}
}
