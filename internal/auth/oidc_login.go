package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Issuer is the issuer URL the verifier trusts.
func (v *OIDCVerifier) Issuer() string { return v.c.Issuer }

// Audience is the aud the verifier requires: the web UI's client ID.
func (v *OIDCVerifier) Audience() string { return v.c.Audience }

// HTTPClient is the client that reaches the issuer.
func (v *OIDCVerifier) HTTPClient() *http.Client { return v.c.HTTPClient }

// VerifyLogin verifies the ID token of a sign-in as Verify does
// (signature, issuer, audience, expiry) and that its nonce claim is nonce.
// It returns the identity and its roles, mapped as for a bearer token.
func (v *OIDCVerifier) VerifyLogin(ctx context.Context, raw, nonce string) (*Identity, []string, error) {
	id, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	// The signature is verified: the payload may be read as it is.
	parts := strings.Split(raw, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, nil, fmt.Errorf("%w: OIDC payload: %s", ErrInvalidToken, err.Error())
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, nil, fmt.Errorf("%w: OIDC payload: %s", ErrInvalidToken, err.Error())
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(c.Nonce), []byte(nonce)) != 1 {
		return nil, nil, fmt.Errorf("%w: the ID token's nonce is not the sign-in's", ErrInvalidToken)
	}
	roles := make([]string, 0, len(id.Grants))
	for _, g := range id.Grants {
		roles = append(roles, g.Role)
	}
	return id, roles, nil
}
