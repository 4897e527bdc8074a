package nks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/cloud/httpcall"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/retry"
)

// TokenSource hands out the token sent as X-Auth-Token.
// *identity.Source implements it.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
	// Invalidate drops token after the API answered 401 to it.
	Invalidate(token string)
}

// Header names and the version value sent on every request. Both version
// header names are sent: the spec names Platform-API-Version, the public
// docs and clients send OpenStack-API-Version (spec/FIDELITY.md).
const (
	HeaderToken            = "X-Auth-Token"
	HeaderVersion          = "Platform-API-Version"
	HeaderOpenStackVersion = "OpenStack-API-Version"
	APIVersion             = "container-infra latest"
)

// DefaultRegion is used when a Config names neither a base URL nor a region.
const DefaultRegion = "kr1"

// Regions lists the regions with a public host (spec/FIDELITY.md).
var Regions = []string{"kr1", "kr2", "kr3"}

// RegionURL returns the public base URL of region (kr1, kr2, kr3; case
// is ignored).
func RegionURL(region string) (string, error) {
	r := strings.ToLower(strings.TrimSpace(region))
	for _, known := range Regions {
		if r == known {
			return "https://" + r + "-api-kubernetes-infrastructure.nhncloudservice.com", nil
		}
	}
	return "", fault.Errorf(fault.Invalid, "nks: unknown region %q; known regions are %s (or set base_url)", region, strings.Join(Regions, ", "))
}

// Config configures a Client.
type Config struct {
	// BaseURL overrides the region's host (a simulator's
	// http://127.0.0.1:PORT/nks); paths like /v1/clusters are appended.
	BaseURL string
	// Region picks the public host when BaseURL is empty (default kr1).
	Region     string
	Tokens     TokenSource
	HTTPClient *http.Client
	// Sleep waits between attempts (default: a timer cut short by ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxAttempts bounds the attempts of a GET, retries included
	// (default 4; 1 disables retries).
	MaxAttempts int
	// Now reads Retry-After dates (default time.Now).
	Now func() time.Time
}

// Client calls the cluster API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	base   *url.URL
	policy httpcall.Policy
}

// Backoff bounds: the first retry waits up to baseBackoff, doubling up to
// maxBackoff; a Retry-After longer than maxRetryAfter is cut to it.
const (
	baseBackoff   = 500 * time.Millisecond
	maxBackoff    = 10 * time.Second
	maxRetryAfter = 60 * time.Second
	maxBody       = 32 << 20
)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		region := cfg.Region
		if strings.TrimSpace(region) == "" {
			region = DefaultRegion
		}
		var err error
		if base, err = RegionURL(region); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Errorf(fault.Invalid, "nks: base URL must be an http(s) URL with a host (got %q)", cfg.BaseURL)
	}
	if cfg.Tokens == nil {
		return nil, fault.Errorf(fault.Invalid, "nks: no token source; give a token or identity credentials")
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
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	c := &Client{cfg: cfg, base: u}
	// The retry policy (doc.go, Retries): only GETs are sent again after a
	// 5xx or a connection failure; any call after a 429, and once after a
	// 401 with a fresh token.
	c.policy = httpcall.Policy{
		Attempts: cfg.MaxAttempts, Backoff: baseBackoff, MaxBackoff: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Repeat: httpcall.Safe, Refresh: httpcall.RefreshToken(cfg.Tokens, HeaderToken),
		Client: cfg.HTTPClient, Sleep: cfg.Sleep, Now: cfg.Now,
	}
	return c, nil
}

// ConfigFrom reads a runbook connection map: base_url (overrides the
// region's host) and region (kr1, kr2, kr3; default kr1). Credentials are
// read by identity.ConfigFrom from the same map and passed in as tokens.
func ConfigFrom(conn map[string]any, tokens TokenSource) (Config, error) {
	cfg := Config{Tokens: tokens}
	for _, f := range []struct {
		key string
		dst *string
	}{{"base_url", &cfg.BaseURL}, {"region", &cfg.Region}} {
		v, ok := conn[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Config{}, fault.Errorf(fault.Invalid, "nks connection: %s must be a string (got %T)", f.key, v)
		}
		*f.dst = strings.TrimSpace(s)
	}
	if cfg.BaseURL == "" && cfg.Region != "" {
		if _, err := RegionURL(cfg.Region); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// BaseURL returns the address calls go to (no trailing slash).
func (c *Client) BaseURL() string { return c.base.String() }

// Path joins escaped path segments below /v1: Path("clusters", name,
// "nodegroups") is "/v1/clusters/<name>/nodegroups". Names may hold any
// character; each segment is escaped.
func Path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

func checkID(what, v string) error {
	if strings.TrimSpace(v) == "" {
		return fault.Errorf(fault.Invalid, "nks: %s is empty", what)
	}
	return nil
}

// do sends one operation: method and path (escaped, from Path), in as the
// JSON body (nil: none), out as the decoded 2xx answer (nil: ignored). The
// client's policy (New) decides what is repeated.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	op := method + " " + path
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return &fault.Error{Code: fault.Internal, Message: op + ": encoding the request", Err: err}
		}
	}
	_, err := httpcall.Do(ctx, c.policy, httpcall.Call{
		Op: op,
		Request: func(ctx context.Context) (*http.Request, error) {
			token, err := c.cfg.Tokens.Token(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			return c.request(ctx, method, path, token, body)
		},
		Read: func(resp *http.Response) error { return decode(op, resp, out) },
		Failed: func(resp *http.Response, raw []byte) error {
			ae := parseAPIError(op, resp.StatusCode, raw)
			ae.RetryAfter = retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())
			return ae.stepsError()
		},
	})
	return err
}

// decode reads a 2xx answer into out (nil, or an empty body: ignored).
func decode(op string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &fault.Error{Code: fault.Unavailable, Message: op + ": reading the answer", Err: err}
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &fault.Error{Code: fault.Internal, Message: op + ": decoding the answer", Err: err}
	}
	return nil
}

func (c *Client) request(ctx context.Context, method, path, token string, body []byte) (*http.Request, error) {
	u, err := url.Parse(c.base.String() + path)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: method + " " + path, Err: err}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: method + " " + path, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderVersion, APIVersion)
	req.Header.Set(HeaderOpenStackVersion, APIVersion)
	req.Header.Set(HeaderToken, token)
	return req, nil
}

// uuidAnswer is the answer of most mutating calls: the UUID of the cluster
// or node group acted on (not of the task).
type uuidAnswer struct {
	UUID string `json:"uuid"`
}

func (c *Client) post(ctx context.Context, method, path string, in any) (string, error) {
	var out uuidAnswer
	if err := c.do(ctx, method, path, in, &out); err != nil {
		return "", err
	}
	return out.UUID, nil
}
