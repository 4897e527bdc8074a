package server_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/server"
)

// ssoIssuer is a local OIDC issuer with an authorization and a token
// endpoint: it signs in "dora" (groups: approver) without asking, and its
// knobs spoil the ID token it issues.
type ssoIssuer struct {
	t   *testing.T
	srv *httptest.Server
	key *rsa.PrivateKey

	mu        sync.Mutex
	codes     map[string]url.Values // code -> the authorization request
	badNonce  bool
	expiredAt time.Time
}

func newSSOIssuer(t *testing.T) *ssoIssuer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	is := &ssoIssuer{t: t, key: k, codes: map[string]url.Values{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *ssoIssuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != "runbook-ui" || q.Get("code_challenge_method") != "S256" ||
		q.Get("state") == "" || q.Get("nonce") == "" || !strings.Contains(q.Get("scope"), "openid") {
		http.Error(w, "bad authorization request: "+q.Encode(), http.StatusBadRequest)
		return
	}
	code := rand.Text()
	is.mu.Lock()
	is.codes[code] = q
	is.mu.Unlock()
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
}

func (is *ssoIssuer) token(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	req, ok := is.codes[r.PostFormValue("code")]
	delete(is.codes, r.PostFormValue("code"))
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	switch {
	case !ok, r.PostFormValue("grant_type") != "authorization_code", r.PostFormValue("redirect_uri") != req.Get("redirect_uri"):
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != req.Get("code_challenge"):
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"PKCE"}`))
		return
	}
	nonce, exp := req.Get("nonce"), time.Now().Add(time.Hour)
	if is.badNonce {
		nonce = "another-sign-in"
	}
	if !is.expiredAt.IsZero() {
		exp = is.expiredAt
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	require.NoError(is.t, err)
	raw, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: is.srv.URL, Subject: "dora", Audience: jwt.Audience{"runbook-ui"},
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(exp.Add(-time.Hour))}).
		Claims(map[string]any{"nonce": nonce, "groups": []string{"approver"}}).Serialize()
	require.NoError(is.t, err)
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": raw})
}

func (is *ssoIssuer) set(f func(*ssoIssuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

func withSSO(is *ssoIssuer) envOption {
	return func(o *server.Options) {
		v, err := auth.NewOIDCVerifier(auth.OIDCConfig{Issuer: is.srv.URL, Audience: "runbook-ui"})
		if err != nil {
			panic(err)
		}
		o.Auth.OIDC = v
	}
}

// ssoClient is a browser without a browser: a cookie jar, and redirects
// followed or not.
func ssoClient(t *testing.T, follow bool) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// With auth.oidc, the login page offers SSO: the authorization-code flow
// with PKCE signs the issuer's user in with the roles its groups map to,
// and a callback of another state, an ID token of another nonce or an
// expired one signs no one in.
func TestSignInWithSSO(t *testing.T) {
	is := newSSOIssuer(t)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withSSO(is))

	t.Run("the login page offers SSO and the flow signs the user in", func(t *testing.T) {
		c := ssoClient(t, true)
		_, login := get(t, c, e.url+"/login")
		assert.Contains(t, login, "Sign in with SSO")
		resp, body := get(t, c, e.url+"/login/oidc?next=/approvals")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, `url=/approvals`)
		resp, page := get(t, c, e.url+"/approvals")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, page, ">dora<", "signed in as the ID token's subject")
		resp, _ = get(t, c, e.url+"/playbooks/gate")
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})

	// flow runs the flow without following the callback, and returns the
	// client and the callback URL.
	flow := func(t *testing.T) (*http.Client, *url.URL) {
		c := ssoClient(t, false)
		resp, _ := get(t, c, e.url+"/login/oidc")
		require.Equal(t, http.StatusFound, resp.StatusCode)
		resp, body := get(t, c, resp.Header.Get("Location"))
		require.Equal(t, http.StatusFound, resp.StatusCode, body)
		cb, err := url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
		return c, cb
	}
	refused := func(t *testing.T, c *http.Client, cb *url.URL, want int) {
		t.Helper()
		resp, body := get(t, c, cb.String())
		assert.Equal(t, want, resp.StatusCode, body)
		assert.Contains(t, body, "SSO failed")
		resp, _ = get(t, c, e.url+"/runs")
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "no session")
	}

	t.Run("a callback of another state is refused", func(t *testing.T) {
		c, cb := flow(t)
		q := cb.Query()
		q.Set("state", "forged")
		cb.RawQuery = q.Encode()
		refused(t, c, cb, http.StatusForbidden)
	})
	t.Run("an ID token of another nonce is refused", func(t *testing.T) {
		is.set(func(is *ssoIssuer) { is.badNonce = true })
		defer is.set(func(is *ssoIssuer) { is.badNonce = false })
		c, cb := flow(t)
		refused(t, c, cb, http.StatusUnauthorized)
	})
	t.Run("an expired ID token is refused", func(t *testing.T) {
		is.set(func(is *ssoIssuer) { is.expiredAt = time.Now().Add(-time.Minute) })
		defer is.set(func(is *ssoIssuer) { is.expiredAt = time.Time{} })
		c, cb := flow(t)
		refused(t, c, cb, http.StatusUnauthorized)
	})
	t.Run("a callback without the flow's cookie is refused", func(t *testing.T) {
		_, cb := flow(t)
		refused(t, ssoClient(t, false), cb, http.StatusForbidden)
	})
}
