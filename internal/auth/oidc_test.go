package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
)

// issuer is a local OIDC issuer: discovery and a JWKS it can rotate.
type issuer struct {
	srv *httptest.Server
	mu  sync.Mutex
	pub []jose.JSONWebKey
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"authorization_endpoint": is.srv.URL + "/auth", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.pub})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func newKey(t *testing.T) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

// publish adds k's public half to the JWKS under kid.
func (is *issuer) publish(k *rsa.PrivateKey, kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.pub = append(is.pub, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
}

type claims struct {
	jwt.Claims
	Groups []string `json:"groups,omitempty"`
	Email  string   `json:"email,omitempty"`
}

func sign(t *testing.T, k *rsa.PrivateKey, kid string, c claims) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	require.NoError(t, err)
	raw, err := jwt.Signed(s).Claims(c).Serialize()
	require.NoError(t, err)
	return raw
}

func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	k1 := newKey(t)
	is.publish(k1, "k1")
	v, err := auth.NewOIDCVerifier(auth.OIDCConfig{Issuer: is.srv.URL, Audience: "runbook", NameClaim: "email",
		RoleMap: map[string][]string{"ops": {"operator", "approver"}, "ops-admins": {"admin"}}})
	require.NoError(t, err)
	a, err := auth.New(auth.Options{OIDC: v})
	require.NoError(t, err)
	now := time.Now()
	good := func() claims {
		return claims{Claims: jwt.Claims{Issuer: is.srv.URL, Subject: "u1", Audience: jwt.Audience{"runbook"},
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))},
			Groups: []string{"ops", "cafeteria"}, Email: "kim@example.com"}
	}

	t.Run("a valid token gives the identity and the mapped roles", func(t *testing.T) {
		id, err := a.Authenticate(t.Context(), sign(t, k1, "k1", good()))
		require.NoError(t, err)
		assert.Equal(t, "kim@example.com", id.Name)
		assert.Equal(t, auth.KindOIDC, id.Kind)
		assert.Equal(t, []string{"approver", "operator"}, id.Roles())
		assert.True(t, id.Can(auth.StartRuns, "any"))
		assert.False(t, id.Can(auth.ManageTokens, ""))
	})
	refused := map[string]func() string{
		"an expired token": func() string {
			c := good()
			c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute))
			return sign(t, k1, "k1", c)
		},
		"a token for another audience": func() string {
			c := good()
			c.Audience = jwt.Audience{"someone-else"}
			return sign(t, k1, "k1", c)
		},
		"a token of another issuer": func() string {
			c := good()
			c.Issuer = "https://evil.example.com"
			return sign(t, k1, "k1", c)
		},
		"a token signed by a key the issuer never published": func() string {
			return sign(t, newKey(t), "k1", good())
		},
		"a token whose signature was tampered with": func() string {
			raw := []byte(sign(t, k1, "k1", good()))
			raw[len(raw)-5] ^= 0x01
			return string(raw)
		},
	}
	for name, mk := range refused {
		t.Run(name+" is refused", func(t *testing.T) {
			raw := mk()
			_, err := a.Authenticate(t.Context(), raw)
			require.Error(t, err)
			assert.True(t, errors.Is(err, auth.ErrInvalidToken), "%v", err)
			assert.NotContains(t, err.Error(), raw, "the error never holds the token")
		})
	}
	t.Run("a key rotated in after the keys were cached is fetched", func(t *testing.T) {
		k2 := newKey(t)
		is.publish(k2, "k2")
		c := good()
		c.Groups = []string{"ops-admins"}
		id, err := a.Authenticate(t.Context(), sign(t, k2, "k2", c))
		require.NoError(t, err)
		assert.Equal(t, []string{"admin"}, id.Roles())
	})
}
