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

	"github.com/runbook/runbook/internal/cloud/httpcall"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/retry"
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

	policy, predictPolicy httpcall.Policy

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
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{cfg: cfg, base: u, prefix: "/v1.0/appkeys/" + url.PathEscape(cfg.AppKey)}
	// The retry policies (doc.go, Errors and retries). The SDK repeats 413,
	// 429 and 503; 413 and 429 refuse a call before the service acts, so
	// any call is sent again after them, creates included. After a 5xx or a
	// connection failure only GETs are: a create, delete or stop may have
	// happened. A 401 gets one fresh bearer token. Inference has no side
	// effect, so a predict is sent again after anything transient.
	c.policy = httpcall.Policy{
		Attempts: cfg.MaxAttempts, Backoff: baseBackoff, MaxBackoff: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Repeat: httpcall.Safe, Refused: []int{http.StatusRequestEntityTooLarge}, Refresh: c.refresh,
		Client: cfg.HTTPClient, Sleep: cfg.Sleep, Now: cfg.Now,
	}
	c.predictPolicy = c.policy
	c.predictPolicy.Repeat, c.predictPolicy.Refresh = httpcall.Always, nil
	return c, nil
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
// answer whose header says isSuccessful it returns the raw body. The
// client's policy (New) decides what is repeated.
func (c *Client) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, &fault.Error{Code: fault.Internal, Message: "easymaker: " + op + ": encoding the request", Err: err}
		}
	}
	var raw []byte
	_, err := httpcall.Do(ctx, c.policy, httpcall.Call{
		Op: "easymaker: " + op,
		Request: func(ctx context.Context) (*http.Request, error) {
			return c.request(ctx, method, c.base.String()+c.prefix+path, body)
		},
		Read: func(resp *http.Response) error {
			var err error
			raw, err = c.readEnvelope(op, resp)
			return err
		},
		Failed: c.failed(op),
	})
	return raw, err
}

// readEnvelope reads a 2xx answer: its raw body when the envelope's header
// says isSuccessful (or there is no header), else the header's error.
func (c *Client) readEnvelope(op string, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &fault.Error{Code: fault.Unavailable, Message: "easymaker: " + op + ": reading the answer", Err: err}
	}
	var env envelope
	if json.Unmarshal(raw, &env) == nil && (env.Header.IsSuccessful || env.Header == (Header{})) {
		return raw, nil
	}
	return nil, parseAPIError(op, resp.StatusCode, raw).stepsError()
}

// failed reads a failed answer of op into an *APIError.
func (c *Client) failed(op string) func(resp *http.Response, raw []byte) error {
	return func(resp *http.Response, raw []byte) error {
		ae := parseAPIError(op, resp.StatusCode, raw)
		ae.RetryAfter = retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())
		return ae.stepsError()
	}
}

// refresh drops the bearer token a 401 refused; with a secret key there is
// nothing to refresh.
func (c *Client) refresh(context.Context, *http.Request) bool {
	if !c.usesToken() {
		return false
	}
	c.dropToken()
	return true
}

func (c *Client) request(ctx context.Context, method, target string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "easymaker: " + method + " " + target, Err: err}
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
	return req, nil
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
