package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// DefaultURL is the public identity service (spec/FIDELITY.md).
const DefaultURL = "https://api-identity-infrastructure.nhncloudservice.com"

// Refresh margins: a token is renewed RefreshMargin before it expires, or
// a tenth of its lifetime before when that is shorter. A token whose
// answer carries no readable expiry is kept for DefaultLifetime.
const (
	RefreshMargin   = 5 * time.Minute
	DefaultLifetime = 30 * time.Minute
	refreshTimeout  = 2 * time.Minute
)

// Config configures a Source.
type Config struct {
	// BaseURL is the identity service's address (DefaultURL when empty);
	// /v2.0/tokens is appended unless the URL already ends with it.
	BaseURL  string
	TenantID string
	Username string // the user's email
	Password string // the API password, not the console password
	// Token is a static token: when set, it is returned as is and the
	// credentials above are not used.
	Token      string
	HTTPClient *http.Client
	// Now is the clock that expiry is judged by (default time.Now).
	Now func() time.Time
}

// Source hands out tokens. It is safe for concurrent use.
type Source struct {
	cfg      Config
	endpoint string

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	expires   time.Time
	inflight  *call
}

type call struct {
	done    chan struct{}
	token   string
	err     error
	waiters int                // callers waiting on done; guarded by Source.mu
	cancel  context.CancelFunc // abandons the fetch when the last waiter leaves
}

// New checks cfg and returns a Source.
func New(cfg Config) (*Source, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Source{cfg: cfg}
	if cfg.Token != "" {
		return s, nil
	}
	var missing []string
	for _, f := range []struct{ key, v string }{{"tenant_id", cfg.TenantID}, {"username", cfg.Username}, {"password", cfg.Password}} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.key)
		}
	}
	if len(missing) > 0 {
		return nil, fault.Errorf(fault.Invalid, "identity: %s missing; give a token or a tenant ID, user name and API password", strings.Join(missing, ", "))
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Errorf(fault.Invalid, "identity: URL must be an http(s) URL with a host (got %q)", cfg.BaseURL)
	}
	switch {
	case strings.HasSuffix(u.Path, "/v2.0/tokens"):
	case strings.HasSuffix(u.Path, "/v2.0"):
		u.Path += "/tokens"
	default:
		u.Path += "/v2.0/tokens"
	}
	u.RawQuery, u.Fragment = "", ""
	s.endpoint = u.String()
	return s, nil
}

// SourceFrom is the token source of a runbook connection map:
// ConfigFrom, then New.
func SourceFrom(conn map[string]any) (*Source, error) {
	cfg, err := ConfigFrom(conn)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// ConfigFrom reads a runbook connection map: identity_url (default
// DefaultURL), tenant_id, username, password, token. A token alone is
// enough; otherwise tenant_id, username and password are required (New
// checks).
func ConfigFrom(conn map[string]any) (Config, error) {
	var cfg Config
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"identity_url", &cfg.BaseURL},
		{"tenant_id", &cfg.TenantID},
		{"username", &cfg.Username},
		{"password", &cfg.Password},
		{"token", &cfg.Token},
	} {
		v, ok := conn[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Config{}, fault.Errorf(fault.Invalid, "identity connection: %s must be a string (got %T)", f.key, v)
		}
		*f.dst = strings.TrimSpace(s)
	}
	return cfg, nil
}

// Static reports whether the Source hands out a fixed token.
func (s *Source) Static() bool { return s.cfg.Token != "" }

// Token returns a valid token, fetching a new one when none is cached or
// the cached one is about to expire.
func (s *Source) Token(ctx context.Context) (string, error) {
	if s.cfg.Token != "" {
		return s.cfg.Token, nil
	}
	s.mu.Lock()
	if s.token != "" && s.cfg.Now().Before(s.refreshAt) {
		t := s.token
		s.mu.Unlock()
		return t, nil
	}
	c := s.inflight
	if c == nil {
		var fetchCtx context.Context
		fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
		c = &call{done: make(chan struct{}), cancel: cancel}
		s.inflight = c
		go s.refresh(fetchCtx, c)
	}
	c.waiters++
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.token, c.err
	case <-ctx.Done():
		s.leave(c)
		return "", fmt.Errorf("identity: waiting for a token: %w", ctx.Err())
	}
}

// leave drops a waiter of c that gave up; the last one to leave abandons
// the fetch, so that no request outlives every caller that wanted it.
func (s *Source) leave(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.waiters--
	if c.waiters == 0 {
		c.cancel()
		if s.inflight == c {
			s.inflight = nil // the next caller starts a fetch of its own
		}
	}
}

// Invalidate drops token if it is the cached one (the API answered 401 to
// it), so that the next Token fetches a new one. A static token is kept.
func (s *Source) Invalidate(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token != "" && token == s.token {
		s.token, s.refreshAt, s.expires = "", time.Time{}, time.Time{}
	}
}

// Expires returns the expiry of the cached token (zero when none or
// static).
func (s *Source) Expires() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expires
}

// refresh fetches a token for c. It outlives the caller that started it
// while others wait, but not refreshTimeout nor the last waiter (ctx ends
// then).
func (s *Source) refresh(ctx context.Context, c *call) {
	defer c.cancel()
	token, expires, err := s.fetch(ctx)
	now := s.cfg.Now()
	s.mu.Lock()
	if err == nil {
		if expires.IsZero() {
			expires = now.Add(DefaultLifetime)
		}
		s.token, s.expires, s.refreshAt = token, expires, refreshAt(now, expires)
	}
	if s.inflight == c {
		s.inflight = nil
	}
	s.mu.Unlock()
	c.token, c.err = token, err
	close(c.done)
}

// refreshAt is when a token fetched at now and expiring at expires is
// renewed: RefreshMargin before, or a tenth of its lifetime before when
// that is shorter.
func refreshAt(now, expires time.Time) time.Time {
	margin := min(RefreshMargin, expires.Sub(now)/10)
	return expires.Add(-max(margin, 0))
}

type tokenRequest struct {
	Auth struct {
		TenantID            string `json:"tenantId"`
		PasswordCredentials struct {
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"passwordCredentials"`
	} `json:"auth"`
}

type tokenResponse struct {
	Access struct {
		Token struct {
			ID      string `json:"id"`
			Expires string `json:"expires"`
		} `json:"token"`
	} `json:"access"`
}

// keystoneError is the identity service's error body.
type keystoneError struct {
	Error struct {
		Code    int    `json:"code"`
		Title   string `json:"title"`
		Message string `json:"message"`
	} `json:"error"`
}

const op = "identity: POST /v2.0/tokens"

func (s *Source) fetch(ctx context.Context) (string, time.Time, error) {
	var body tokenRequest
	body.Auth.TenantID = s.cfg.TenantID
	body.Auth.PasswordCredentials.Username = s.cfg.Username
	body.Auth.PasswordCredentials.Password = s.cfg.Password
	b, err := json.Marshal(body)
	if err != nil {
		return "", time.Time{}, &fault.Error{Code: fault.Internal, Message: op, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(b))
	if err != nil {
		return "", time.Time{}, &fault.Error{Code: fault.Invalid, Message: op, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", time.Time{}, &fault.Error{Code: fault.Unavailable, Message: op, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", time.Time{}, &fault.Error{Code: fault.Unavailable, Message: op + ": reading the answer", Err: err}
	}
	if resp.StatusCode/100 != 2 {
		return "", time.Time{}, statusError(resp.StatusCode, raw)
	}
	var tr tokenResponse
	if err := json.Unmarshal(raw, &tr); err != nil {
		return "", time.Time{}, &fault.Error{Code: fault.Unavailable, Message: op + ": the answer is not a token", Err: err}
	}
	if tr.Access.Token.ID == "" {
		return "", time.Time{}, &fault.Error{Code: fault.Unavailable, Message: op + ": the answer has no access.token.id"}
	}
	return tr.Access.Token.ID, parseExpires(tr.Access.Token.Expires), nil
}

func statusError(status int, raw []byte) error {
	var ke keystoneError
	msg := ""
	if json.Unmarshal(raw, &ke) == nil && ke.Error.Message != "" {
		msg = ke.Error.Message
	} else {
		msg = http.StatusText(status)
	}
	data := map[string]any{"http_status": status}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &fault.Error{Code: fault.Unauthorized, Data: data,
			Message: fmt.Sprintf("%s: HTTP %d: the tenant ID, user name or API password was refused: %s", op, status, msg)}
	case status == http.StatusTooManyRequests:
		return &fault.Error{Code: fault.Throttled, Data: data, Message: fmt.Sprintf("%s: HTTP %d: %s", op, status, msg)}
	case status >= 500:
		return &fault.Error{Code: fault.Unavailable, Data: data, Message: fmt.Sprintf("%s: HTTP %d: %s", op, status, msg)}
	case status == http.StatusNotFound:
		return &fault.Error{Code: fault.Invalid, Data: data, Message: fmt.Sprintf("%s: HTTP 404: no token endpoint here; check identity_url", op)}
	}
	return &fault.Error{Code: fault.Invalid, Data: data, Message: fmt.Sprintf("%s: HTTP %d: %s", op, status, msg)}
}

// parseExpires reads access.token.expires: RFC 3339 (with or without
// fractional seconds), or the same without a zone, taken as UTC. Zero when
// unreadable.
func parseExpires(s string) time.Time {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC); err == nil {
		return t
	}
	return time.Time{}
}
