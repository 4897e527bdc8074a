package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/ui"
)

// sourceIdentity is who an in-process call of the web UI is: the identity
// of its session's source, judged as a bearer token would be now (a
// token's hash against the server token, the users and the stored tokens,
// so a revoked token's session is refused; an OIDC session's name and
// roles as its ID token gave them, while OIDC is configured). The source
// reaches the API only in a request's context, which no request from the
// network carries.
func (s *Server) sourceIdentity(ctx context.Context, src ui.Source) (*auth.Identity, error) {
	switch src.Kind {
	case ui.SourceToken:
		return s.authn.AuthenticateHash(ctx, src.TokenHash)
	case ui.SourceOIDC:
		if s.o.Auth.OIDC == nil || src.Name == "" {
			return nil, fmt.Errorf("%w: OIDC sign-in is not configured", auth.ErrInvalidToken)
		}
		if err := auth.CheckRoles(src.Roles); err != nil {
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, err.Error())
		}
		return &auth.Identity{Name: src.Name, Kind: auth.KindOIDC, Grants: auth.Grants(src.Roles, nil)}, nil
	}
	return nil, fmt.Errorf("%w: a session of unknown kind %q", auth.ErrInvalidToken, src.Kind)
}

// recheck is who a UI session is now, for the UI.
func (s *Server) recheck(ctx context.Context, src ui.Source) (ui.Identity, error) {
	if !s.apiEnabled(ctx) {
		return ui.Identity{}, errors.New("the API is disabled")
	}
	id, err := s.sourceIdentity(ctx, src)
	if errors.Is(err, auth.ErrInvalidToken) {
		return ui.Identity{}, ui.ErrBadToken
	}
	if err != nil {
		s.log.Error("ui session: its identity cannot be checked", "err", err)
		return ui.Identity{}, errors.New("the session cannot be checked now")
	}
	return s.uiIdentity(id), nil
}

// oidcLogin is the UI's "Sign in with SSO" of auth.oidc (nil without it).
// The client ID is the audience: the ID token's aud is the client's ID.
func (s *Server) oidcLogin() *ui.OIDCLogin {
	v := s.o.Auth.OIDC
	if v == nil {
		return nil
	}
	return &ui.OIDCLogin{Issuer: v.Issuer(), ClientID: v.Audience(), HTTPClient: v.HTTPClient(),
		SignIn: func(ctx context.Context, raw, nonce string) (ui.Identity, ui.Source, error) {
			id, roles, err := v.VerifyLogin(ctx, raw, nonce)
			if err != nil {
				return ui.Identity{}, ui.Source{}, err
			}
			return s.uiIdentity(id), ui.Source{Kind: ui.SourceOIDC, Name: id.Name, Roles: roles}, nil
		}}
}
