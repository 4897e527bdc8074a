package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/yamlnode"
)

// ErrInvalidToken: the bearer token is not one the server knows, is
// revoked or expired, or (OIDC) does not verify. Its message never holds
// the token.
var ErrInvalidToken = errors.New("invalid bearer token")

// ExpiredError is a stored token presented after its expiry. It is an
// ErrInvalidToken.
type ExpiredError struct {
	Name string
	At   time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("token %s expired at %s; make a new one (runbook token create %s --ttl ...)", e.Name, e.At.UTC().Format(time.RFC3339), e.Name)
}

// Is makes an ExpiredError an ErrInvalidToken.
func (e *ExpiredError) Is(target error) bool { return target == ErrInvalidToken }

// ParseTTL reads a token's time to live ("90d", "12h", "" for none); it
// must be at least a second.
func ParseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := yamlnode.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("ttl: %w", err)
	}
	if d < time.Second {
		return 0, fmt.Errorf("ttl must be at least 1s (got %s)", s)
	}
	return d, nil
}

// User is a user or service account of the config (auth.users).
type User struct {
	Name        string
	Roles       []string
	Playbooks   []string // limit every role to these playbook patterns
	TokenSHA256 string   // hex SHA-256 of the user's token
}

// TokenStore is where the tokens made by `runbook token create` are
// kept (the state store).
type TokenStore interface {
	Tokens(ctx context.Context) ([]state.Token, error)
	TouchToken(ctx context.Context, name string, at time.Time) error
}

// Options configure an Authenticator.
type Options struct {
	// ServerToken is the token named by server.token_secret: admin. Empty:
	// none. Only its hash is kept.
	ServerToken string
	Users       []User
	Tokens      TokenStore    // nil: no stored tokens
	OIDC        *OIDCVerifier // nil: no OIDC
	// Now is the clock that expires tokens (default time.Now).
	Now func() time.Time
	// Log reports a last use that could not be recorded (default: none).
	Log *slog.Logger
}

// Authenticator tells who presents a bearer token.
type Authenticator struct {
	server string // hash of the server token, "" for none
	users  []User
	tokens TokenStore
	oidc   *OIDCVerifier
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	touched map[string]time.Time // by token name: the last use recorded by this process
}

// New checks the options and returns an Authenticator.
func New(o Options) (*Authenticator, error) {
	a := &Authenticator{users: o.Users, tokens: o.Tokens, oidc: o.OIDC, now: o.Now, log: o.Log, touched: map[string]time.Time{}}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if o.ServerToken != "" {
		a.server = HashToken(o.ServerToken)
	}
	seen := map[string]bool{}
	for _, u := range o.Users {
		if err := CheckName(u.Name); err != nil {
			return nil, fmt.Errorf("auth user: %w", err)
		}
		if seen[u.Name] {
			return nil, fmt.Errorf("auth user %s: named twice", u.Name)
		}
		seen[u.Name] = true
		if err := CheckRoles(u.Roles); err != nil {
			return nil, fmt.Errorf("auth user %s: %w", u.Name, err)
		}
		if err := CheckPatterns(u.Playbooks); err != nil {
			return nil, fmt.Errorf("auth user %s: %w", u.Name, err)
		}
		if err := CheckHash(u.TokenSHA256); err != nil {
			return nil, fmt.Errorf("auth user %s: %w", u.Name, err)
		}
	}
	return a, nil
}

// Enabled reports whether a bearer can be accepted without a stored
// token: a server token, configured users or OIDC.
func (a *Authenticator) Enabled() bool {
	return a.server != "" || len(a.users) > 0 || a.oidc != nil
}

// ServerName is the name of the identity of the server token.
const ServerName = "server-token"

// Authenticate returns the identity of bearer, or an error wrapping
// ErrInvalidToken. Hashes are compared in constant time, each against
// every known hash.
func (a *Authenticator) Authenticate(ctx context.Context, bearer string) (*Identity, error) {
	if bearer == "" {
		return nil, ErrInvalidToken
	}
	if a.oidc != nil && looksLikeJWT(bearer) {
		return a.oidc.Verify(ctx, bearer)
	}
	return a.AuthenticateHash(ctx, HashToken(bearer))
}

// AuthenticateHash is Authenticate for a token known only by its hash (hex
// SHA-256), as a session of the web UI keeps it: the server token, a
// configured user or a stored token that is not revoked.
func (a *Authenticator) AuthenticateHash(ctx context.Context, h string) (*Identity, error) {
	if h == "" {
		return nil, ErrInvalidToken
	}
	var found *Identity
	if a.server != "" && sameHash(h, a.server) {
		found = &Identity{Name: ServerName, Kind: KindServer, Grants: []Grant{{Role: RoleAdmin}}}
	}
	for _, u := range a.users {
		if sameHash(h, u.TokenSHA256) && found == nil {
			found = &Identity{Name: u.Name, Kind: KindUser, Grants: Grants(u.Roles, u.Playbooks)}
		}
	}
	if found != nil {
		return found, nil
	}
	if a.tokens == nil {
		return nil, ErrInvalidToken
	}
	toks, err := a.tokens.Tokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	now := a.now()
	var expired error
	for _, t := range toks {
		if !sameHash(h, t.Hash) || !t.RevokedAt.IsZero() || found != nil {
			continue
		}
		if t.Expired(now) {
			expired = &ExpiredError{Name: t.Name, At: t.ExpiresAt}
			continue
		}
		found = &Identity{Name: t.Name, Kind: KindToken, Grants: Grants(t.Roles, t.Playbooks)}
	}
	switch {
	case found != nil:
		a.touch(ctx, found.Name, now)
		return found, nil
	case expired != nil:
		return nil, expired
	}
	return nil, ErrInvalidToken
}

// touchEvery is how often a token's last use is written: a token that
// authenticates every request costs a write a minute, not one a request.
const touchEvery = time.Minute

// touch records the use of stored token name at now, at most once a
// touchEvery, in the background: the request does not wait for it.
func (a *Authenticator) touch(ctx context.Context, name string, now time.Time) {
	at := now.UTC().Truncate(time.Second)
	a.mu.Lock()
	if last, ok := a.touched[name]; ok && at.Sub(last) < touchEvery {
		a.mu.Unlock()
		return
	}
	a.touched[name] = at
	a.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.tokens.TouchToken(ctx, name, at); err != nil {
			a.log.Warn("the last use of a token was not recorded", "token", name, "err", err)
		}
	}()
}

// looksLikeJWT reports whether s has a JWT's three dot-separated parts (a
// token of NewToken has no dot).
func looksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.HasPrefix(s, TokenPrefix)
}
