package easymaker

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

	"github.com/runbook/runbook/internal/cloud/retry"
	"github.com/runbook/runbook/internal/fault"
)

// Header names of the two authentication schemes (spec/FIDELITY.md).
const (
	HeaderSecretKey     = "X-Secret-Key"
	HeaderAuthorization = "x-nhn-authorization"
)

// Defaults of ConfigFrom and New.
const (
	DefaultRegion   = "kr1"
	DefaultTokenURL = "https://oauth.api.nhncloudservice.com/oauth2/token/create"
)

// RegionURL returns the public base URL of region.
func RegionURL(region string) string {
	return "https://" + strings.ToLower(strings.TrimSpace(region)) + "-easymaker.api.nhncloudservice.com"
}

// Config configures a Client. One of SecretKey or the access key pair
// (AccessKeyID, AccessKeySecret) is required; with both, the secret key
// is used.
type Config struct {
	// BaseURL overrides the region's host (a simulator's
	// http://127.0.0.1:PORT/easymaker); /v1.0/appkeys/{appkey}/... is appended.
	BaseURL string
	// Region picks the public host when BaseURL is empty (default kr1).
	Region          string
	AppKey          string
	SecretKey       string
	AccessKeyID     string
	AccessKeySecret string
	// TokenURL is where the access key pair gets a bearer token
	// (default DefaultTokenURL).
	TokenURL   string
	HTTPClient *http.Client

	// Sleep waits between attempts (default: a timer cut short by ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxAttempts bounds the attempts of an idempotent call, retries
	// included (default 4; 1 disables retries).
	MaxAttempts int
	// Now reads Retry-After dates and token expiry (default time.Now).
	Now func() time.Time
}

// ConfigFrom reads a runbook connection map: base_url, region (default
// kr1), appkey (required), secret_key, access_key_id, access_key_secret,
// token_url (default DefaultTokenURL). One of secret_key or the access key
// pair is required.
func ConfigFrom(conn map[string]any) (Config, error) {
	var cfg Config
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"base_url", &cfg.BaseURL}, {"region", &cfg.Region}, {"appkey", &cfg.AppKey},
		{"secret_key", &cfg.SecretKey}, {"access_key_id", &cfg.AccessKeyID},
		{"access_key_secret", &cfg.AccessKeySecret}, {"token_url", &cfg.TokenURL},
	} {
		v, ok := conn[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Config{}, fault.Errorf(fault.Invalid, "easymaker connection: %s must be a string (got %T)", f.key, v)
		}
		*f.dst = strings.TrimSpace(s)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.TokenURL == "" {
		cfg.TokenURL = DefaultTokenURL
	}
	if err := cfg.check(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func (cfg *Config) check() error {
	if cfg.AppKey == "" {
		return fault.Errorf(fault.Invalid, "easymaker connection: appkey is required (the console's appkey menu shows it)")
	}
	if cfg.SecretKey == "" && (cfg.AccessKeyID == "" || cfg.AccessKeySecret == "") {
		if cfg.AccessKeyID != "" || cfg.AccessKeySecret != "" {
			return fault.Errorf(fault.Invalid, "easymaker connection: access_key_id and access_key_secret go together; give both (or secret_key)")
		}
		return fault.Errorf(fault.Invalid, "easymaker connection: give secret_key, or access_key_id and access_key_secret")
	}
	return nil
}

// Client calls the AI EasyMaker API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	base   *url.URL
	prefix string // /v1.0/appkeys/{appkey}

	tokMu     sync.Mutex
	token     string
	tokenExp  time.Time
	resolveMu sync.Mutex
	flavors   []Flavor
	images    []Image
	algos     []Algorithm
}

// Backoff bounds: the first retry waits up to baseBackoff, doubling up to
// maxBackoff; a Retry-After longer than maxRetryAfter is cut to it.
const (
	baseBackoff   = 500 * time.Millisecond
	maxBackoff    = 10 * time.Second
	maxRetryAfter = 60 * time.Second
	maxBody       = 32 << 20
	// tokenMargin: a cached token is renewed this long before it expires.
	tokenMargin = 5 * time.Minute
)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		region := cfg.Region
		if strings.TrimSpace(region) == "" {
			region = DefaultRegion
		}
		base = RegionURL(region)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Errorf(fault.Invalid, "easymaker: base URL must be an http(s) URL with a host (got %q)", base)
	}
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	if cfg.TokenURL == "" {
		cfg.TokenURL = DefaultTokenURL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = retry.Sleep
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, base: u, prefix: "/v1.0/appkeys/" + url.PathEscape(cfg.AppKey)}, nil
}

// BaseURL returns the address calls go to (no trailing slash).
func (c *Client) BaseURL() string { return c.base.String() }

// StatusDone applies the SDK's wait rule to a status code: done at
// COMPLETE, ACTIVE or ENABLED; failed as soon as the status contains FAIL
// or STOP (so STOP_IN_PROGRESS already ends a wait, as failed).
func StatusDone(code string) (done bool, failed bool) {
	c := strings.ToUpper(code)
	if strings.Contains(c, "FAIL") || strings.Contains(c, "STOP") {
		return true, true
	}
	switch c {
	case StatusComplete, StatusActive, "ENABLED":
		return true, false
	}
	return false, false
}

// envelope is the common shape of answers: the header plus the resource
// under its key, read by the caller from the raw message.
type envelope struct {
	Header Header  `json:"header"`
	Paging *Paging `json:"paging,omitempty"`
}

// do sends one operation: method, path below the appkey prefix (already
// escaped, query included), in as the JSON body (nil: none). On a 2xx
// answer whose header says isSuccessful it returns the raw body.
//
// Retries: GET, DELETE and PUT (stop) are repeated on 413, 429, 503 and
// network errors (MaxAttempts in all, exponential backoff with jitter,
// Retry-After honoured). POST is repeated only on 429 (the rate limiter
// refused it, so nothing was created); other failures of a create are
// returned, marked ambiguous where the service may have acted, and the
// steps reconcile by name. Any call is repeated once after a 401 with a
// fresh token when the access key pair is used.
func (c *Client) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, &fault.Error{Code: fault.Internal, Message: "easymaker: " + op + ": encoding the request", Err: err}
		}
	}
	idempotent := method != http.MethodPost
	reauthed := false
	for attempt := 1; ; attempt++ {
		resp, err := c.send(ctx, method, c.base.String()+c.prefix+path, body)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("easymaker: %s: %w", op, ctx.Err())
			}
			var se *fault.Error
			if asStepsError(err, &se) { // token errors
				return nil, se
			}
			if idempotent && attempt < c.cfg.MaxAttempts {
				if err := c.cfg.Sleep(ctx, retry.Backoff(attempt, baseBackoff, maxBackoff)); err != nil {
					return nil, fmt.Errorf("easymaker: %s: %w", op, err)
				}
				continue
			}
			return nil, &fault.Error{Code: fault.Unavailable, Message: "easymaker: " + op + attemptsNote(attempt), Err: err,
				Data: map[string]any{"ambiguous": !idempotent}}
		}
		if resp.StatusCode/100 == 2 {
			var env envelope
			if json.Unmarshal(raw, &env) == nil && (env.Header.IsSuccessful || env.Header == (Header{})) {
				return raw, nil
			}
			ae := parseAPIError(op, resp.StatusCode, raw)
			return nil, ae.stepsError()
		}
		ae := parseAPIError(op, resp.StatusCode, raw)
		ae.RetryAfter = retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())
		if resp.StatusCode == http.StatusUnauthorized && !reauthed && c.usesToken() {
			reauthed = true
			c.dropToken()
			attempt-- // the rejected request does not count
			continue
		}
		retryable := resp.StatusCode == http.StatusTooManyRequests ||
			(idempotent && (resp.StatusCode == http.StatusRequestEntityTooLarge || resp.StatusCode == http.StatusServiceUnavailable))
		if retryable && attempt < c.cfg.MaxAttempts {
			wait := retry.Backoff(attempt, baseBackoff, maxBackoff)
			if ae.RetryAfter > 0 {
				wait = min(ae.RetryAfter, maxRetryAfter)
			}
			if err := c.cfg.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("easymaker: %s: %w", op, err)
			}
			continue
		}
		se := ae.stepsError()
		if retryable && attempt > 1 {
			se.Message = fmt.Sprintf("gave up after %d attempts", attempt)
		}
		if !idempotent && resp.StatusCode >= 500 {
			se.Data["ambiguous"] = true
		}
		return nil, se
	}
}

func attemptsNote(attempt int) string {
	if attempt > 1 {
		return fmt.Sprintf(" (gave up after %d attempts)", attempt)
	}
	return ""
}

func (c *Client) send(ctx context.Context, method, target string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.SecretKey != "" {
		req.Header.Set(HeaderSecretKey, c.cfg.SecretKey)
	} else {
		tok, err := c.bearer(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set(HeaderAuthorization, "Bearer "+tok)
	}
	return c.cfg.HTTPClient.Do(req)
}

// call sends one operation and decodes the resource under key of the
// answer into out (nil: ignored).
func (c *Client) call(ctx context.Context, method, path string, in any, key string, out any) error {
	raw, err := c.do(ctx, method, path, in)
	if err != nil {
		return err
	}
	if out == nil || key == "" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return &fault.Error{Code: fault.Internal, Message: "easymaker: " + method + " " + path + ": decoding the answer", Err: err}
	}
	v, ok := m[key]
	if !ok || string(v) == "null" {
		return &fault.Error{Code: fault.Internal, Message: fmt.Sprintf("easymaker: %s %s: the answer has no %q", method, path, key)}
	}
	if err := json.Unmarshal(v, out); err != nil {
		return &fault.Error{Code: fault.Internal, Message: "easymaker: " + method + " " + path + ": decoding " + key, Err: err}
	}
	return nil
}
