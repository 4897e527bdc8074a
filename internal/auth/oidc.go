package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCConfig configures OIDC bearer tokens.
type OIDCConfig struct {
	Issuer   string // issuer URL; its discovery document names the JWKS
	Audience string // the aud the tokens must carry
	// NameClaim is the claim naming the identity (default "sub").
	NameClaim string
	// RolesClaim is the claim listing the caller's groups or roles
	// (default "groups"); a string or a list of strings.
	RolesClaim string
	// RoleMap maps a value of RolesClaim to roles. Empty: values that are
	// role names are the roles. Values mapping to nothing give nothing.
	RoleMap map[string][]string
	// HTTPClient fetches the discovery document and the keys (default
	// http.DefaultClient with a 10 s timeout).
	HTTPClient *http.Client
}

// OIDCVerifier verifies JWTs of one issuer: signature by a key of the
// issuer's JWKS (fetched when needed and cached; a token signed by a key
// not in the cache makes it fetch the set again, so a rotated-in key is
// picked up), issuer, audience and expiry. Discovery happens at the first
// token and is retried until it succeeds.
type OIDCVerifier struct {
	c OIDCConfig

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewOIDCVerifier checks c and returns a verifier. It does not reach the
// issuer yet.
func NewOIDCVerifier(c OIDCConfig) (*OIDCVerifier, error) {
	if c.Issuer == "" || c.Audience == "" {
		return nil, errors.New("oidc: issuer and audience are required")
	}
	for v, roles := range c.RoleMap {
		if err := CheckRoles(roles); err != nil {
			return nil, fmt.Errorf("oidc: role_map %s: %w", v, err)
		}
	}
	if c.NameClaim == "" {
		c.NameClaim = "sub"
	}
	if c.RolesClaim == "" {
		c.RolesClaim = "groups"
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &OIDCVerifier{c: c}, nil
}

func (v *OIDCVerifier) get(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	// The key set fetches with the context given here, long after this
	// request: it must not end with the request.
	kctx := oidc.ClientContext(context.WithoutCancel(ctx), v.c.HTTPClient)
	dctx, cancel := context.WithTimeout(kctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, v.c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discovery of %s: %w", v.c.Issuer, err)
	}
	var meta struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKS == "" {
		return nil, fmt.Errorf("oidc: discovery of %s names no jwks_uri", v.c.Issuer)
	}
	keys := oidc.NewRemoteKeySet(kctx, meta.JWKS)
	v.verifier = oidc.NewVerifier(v.c.Issuer, keys, &oidc.Config{ClientID: v.c.Audience})
	return v.verifier, nil
}

// Verify verifies raw and returns its identity, or an error wrapping
// ErrInvalidToken that says why (never with the token).
func (v *OIDCVerifier) Verify(ctx context.Context, raw string) (*Identity, error) {
	ver, err := v.get(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := ver.Verify(oidc.ClientContext(ctx, v.c.HTTPClient), raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return nil, fmt.Errorf("%w: the OIDC token expired at %s", ErrInvalidToken, exp.Expiry.UTC().Format(time.RFC3339))
		}
		return nil, fmt.Errorf("%w: OIDC: %s", ErrInvalidToken, err.Error())
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: OIDC claims: %s", ErrInvalidToken, err.Error())
	}
	name, _ := claims[v.c.NameClaim].(string)
	if name == "" {
		return nil, fmt.Errorf("%w: the OIDC token has no %q claim", ErrInvalidToken, v.c.NameClaim)
	}
	roles := v.roles(claims[v.c.RolesClaim])
	return &Identity{Name: name, Kind: KindOIDC, Grants: Grants(roles, nil)}, nil
}

// roles maps the roles claim's values to roles.
func (v *OIDCVerifier) roles(claim any) []string {
	var values []string
	switch c := claim.(type) {
	case string:
		values = []string{c}
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok {
				values = append(values, s)
			}
		}
	}
	var out []string
	add := func(r string) {
		if _, ok := RolePermissions[r]; ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, val := range values {
		if len(v.c.RoleMap) == 0 {
			add(val)
			continue
		}
		for _, r := range v.c.RoleMap[val] {
			add(r)
		}
	}
	sort.Strings(out)
	return out
}
