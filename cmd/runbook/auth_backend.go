package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// authBackend is where the token and audit verbs work: the API of the
// runbook serve that holds the state (with the caller's token, which needs
// the admin role), or the state store itself when no server holds it.
// Both give the same records, so the verbs print the same output.
type authBackend interface {
	// createToken makes a token and returns it with its secret, the only
	// time the secret exists outside the caller.
	createToken(ctx context.Context, req api.TokenRequest) (api.TokenCreated, error)
	// tokens lists every token, revoked ones included, by name.
	tokens(ctx context.Context) ([]api.Token, error)
	// revokeToken revokes the live token name; not_found when there is none.
	revokeToken(ctx context.Context, name string) error
	// auditPage returns up to limit records at or after since with a
	// sequence number above after, oldest first, and the after of the next
	// page (0: there is none).
	auditPage(ctx context.Context, since time.Time, after uint64, limit int) ([]state.AuditRecord, uint64, error)
	close()
}

var (
	_ authBackend = (*apiAuth)(nil)
	_ authBackend = (*storeAuth)(nil)
)

// openAuth opens the backend of a token or audit verb, found as the runs
// verbs find theirs (newRunsOpener). When no state exists yet it returns
// nil, unless create is set: then the state file is created.
func openAuth(ctx context.Context, o *runsOpener, create bool) (authBackend, error) {
	b, err := o.open(ctx)
	if err != nil {
		return nil, err
	}
	switch b := b.(type) {
	case *apiBackend:
		return &apiAuth{b: b}, nil
	case *storeBackend:
		return newStoreAuth(b.store), nil
	}
	if !create {
		return nil, nil
	}
	st, err := o.sf.openStore()
	if err != nil {
		return nil, err
	}
	return newStoreAuth(st), nil
}

// newStoreAuth uses st directly.
func newStoreAuth(st state.Store) authBackend { return &storeAuth{st: st} }

// apiAuth goes through the server's API (docs/api.md: tokens, audit).
type apiAuth struct{ b *apiBackend }

func (a *apiAuth) close() {}

func (a *apiAuth) createToken(ctx context.Context, req api.TokenRequest) (api.TokenCreated, error) {
	var out api.TokenCreated
	err := a.b.do(ctx, http.MethodPost, "/api/v1/tokens", req, &out)
	return out, err
}

func (a *apiAuth) tokens(ctx context.Context) ([]api.Token, error) {
	var out api.TokenList
	if err := a.b.do(ctx, http.MethodGet, "/api/v1/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

func (a *apiAuth) revokeToken(ctx context.Context, name string) error {
	return a.b.do(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(name), nil, nil)
}

func (a *apiAuth) auditPage(ctx context.Context, since time.Time, after uint64, limit int) ([]state.AuditRecord, uint64, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	var out api.AuditPage
	if err := a.b.do(ctx, http.MethodGet, "/api/v1/audit?"+q.Encode(), nil, &out); err != nil {
		return nil, 0, err
	}
	return out.Records, out.Next, nil
}

// storeAuth works on the state store directly: whoever may open the state
// file or database may manage its tokens, as they may its runs. What it
// changes is audited under "local:$USER", source "local".
type storeAuth struct {
	st state.Store
}

func (s *storeAuth) close() { s.st.Close() }

// localName is who changes the store directly, for its records: "local:"
// and the login name (a ':' is never in a user's or token's name).
func localName() string {
	if u := os.Getenv("USER"); u != "" {
		return "local:" + u
	}
	return "local"
}

func (s *storeAuth) createToken(ctx context.Context, req api.TokenRequest) (api.TokenCreated, error) {
	secret, err := auth.NewToken()
	if err != nil {
		return api.TokenCreated{}, err
	}
	ttl, err := auth.ParseTTL(req.TTL)
	if err != nil {
		return api.TokenCreated{}, &fault.Error{Code: fault.Invalid, Message: err.Error()}
	}
	t := state.Token{Name: req.Name, Hash: auth.HashToken(secret), Roles: req.Roles, Playbooks: req.Playbooks,
		CreatedAt: time.Now().UTC(), CreatedBy: localName()}
	detail := map[string]any{"roles": req.Roles}
	if ttl > 0 {
		t.ExpiresAt = t.CreatedAt.Add(ttl)
		detail["expires_at"] = t.ExpiresAt.Format(time.RFC3339)
	}
	if len(req.Playbooks) > 0 {
		detail["playbooks"] = req.Playbooks
	}
	err = s.st.CreateToken(ctx, t)
	if errors.Is(err, state.ErrExists) {
		err = &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("a token named %s exists; revoke it first (runbook token revoke %s)", t.Name, t.Name)}
	}
	if err := s.audit(ctx, "token.create", t.Name, detail, err); err != nil {
		return api.TokenCreated{}, err
	}
	return api.TokenCreated{Token: api.ViewToken(t), Secret: secret}, nil
}

// audit appends the record of a change to token name that ended with err,
// as the API records its calls, and returns err, or the failure to write
// the record when the change was made.
func (s *storeAuth) audit(ctx context.Context, action, name string, detail map[string]any, err error) error {
	result := "ok"
	if err != nil {
		result = string(fault.CodeOf(err))
	}
	rec := state.AuditRecord{Identity: localName(), Action: action, Target: "token:" + name, Result: result, Source: "local", Detail: detail}
	if aerr := s.st.AppendAudit(context.WithoutCancel(ctx), rec); aerr != nil && err == nil {
		return fmt.Errorf("%s of token %s done, but its audit record was not written: %w", action, name, aerr)
	}
	return err
}

func (s *storeAuth) tokens(ctx context.Context) ([]api.Token, error) {
	toks, err := s.st.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Token, len(toks))
	for i, t := range toks {
		out[i] = api.ViewToken(t)
	}
	return out, nil
}

func (s *storeAuth) revokeToken(ctx context.Context, name string) error {
	err := s.st.RevokeToken(ctx, name, time.Now().UTC(), localName())
	if errors.Is(err, state.ErrNotFound) {
		err = &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("no live token %q", name)}
	}
	return s.audit(ctx, "token.revoke", name, nil, err)
}

func (s *storeAuth) auditPage(ctx context.Context, since time.Time, after uint64, limit int) ([]state.AuditRecord, uint64, error) {
	recs, err := s.st.Audit(ctx, state.AuditFilter{Since: since, After: after, Limit: limit})
	if err != nil {
		return nil, 0, err
	}
	var next uint64
	if len(recs) == limit {
		next = recs[len(recs)-1].Seq
	}
	return recs, next, nil
}
