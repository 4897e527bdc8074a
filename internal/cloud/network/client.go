package network

import (
	"context"
	"encoding/json"
	"errors"
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

// HeaderToken carries the identity token.
const HeaderToken = "X-Auth-Token"

// DefaultRegion is used when a Config names neither base URLs nor a region.
const DefaultRegion = "kr1"

// Regions lists the regions with public network and image hosts.
var Regions = []string{"kr1", "kr2", "kr3", "jp1"}

// RegionURLs returns the public base URLs of the network and image APIs of
// region (case is ignored).
func RegionURLs(region string) (networkURL, imageURL string, err error) {
	r := strings.ToLower(strings.TrimSpace(region))
	for _, known := range Regions {
		if r == known {
			return "https://" + r + "-api-network-infrastructure.nhncloudservice.com",
				"https://" + r + "-api-image-infrastructure.nhncloudservice.com", nil
		}
	}
	return "", "", &Error{Class: Invalid, Message: fmt.Sprintf(
		"network: unknown region %q; known regions are %s (or set network_url and image_url)", region, strings.Join(Regions, ", "))}
}

// Config configures a Client.
type Config struct {
	// NetworkURL and ImageURL override the region's hosts (a simulator's
	// http://127.0.0.1:PORT/network and /image).
	NetworkURL string
	ImageURL   string
	// Region picks the public hosts that are not overridden (default kr1).
	Region     string
	Tokens     TokenSource
	HTTPClient *http.Client
	// Sleep waits between attempts (default: a timer cut short by ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxAttempts bounds the attempts of a call, retries included
	// (default 4; 1 disables retries).
	MaxAttempts int
	// Now reads Retry-After dates (default time.Now).
	Now func() time.Time
}

// ConfigFrom reads a runbook connection map: network_url, image_url
// (override the region's hosts) and region (kr1, kr2, kr3, jp1; default
// kr1). Credentials are read by identity.ConfigFrom from the same map and
// passed in as tokens.
func ConfigFrom(conn map[string]any, tokens TokenSource) (Config, error) {
	cfg := Config{Tokens: tokens}
	for _, f := range []struct {
		key string
		dst *string
	}{{"network_url", &cfg.NetworkURL}, {"image_url", &cfg.ImageURL}, {"region", &cfg.Region}} {
		v, ok := conn[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return Config{}, &Error{Class: Invalid, Message: fmt.Sprintf("network connection: %s must be a string (got %T)", f.key, v)}
		}
		*f.dst = strings.TrimSpace(s)
	}
	return cfg, nil
}

// Client calls the network and image APIs. It is safe for concurrent use.
type Client struct {
	cfg     Config
	network *url.URL
	image   *url.URL
	policy  httpcall.Policy
}

const (
	baseBackoff   = 500 * time.Millisecond
	maxBackoff    = 10 * time.Second
	maxRetryAfter = 60 * time.Second
	maxBody       = 32 << 20
	maxPages      = 100
)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	region := cfg.Region
	if strings.TrimSpace(region) == "" {
		region = DefaultRegion
	}
	netURL, imgURL := strings.TrimSpace(cfg.NetworkURL), strings.TrimSpace(cfg.ImageURL)
	if netURL == "" || imgURL == "" {
		n, i, err := RegionURLs(region)
		if err != nil {
			return nil, err
		}
		if netURL == "" {
			netURL = n
		}
		if imgURL == "" {
			imgURL = i
		}
	}
	c := &Client{}
	for _, b := range []struct {
		key, raw string
		dst      **url.URL
	}{{"network_url", netURL, &c.network}, {"image_url", imgURL, &c.image}} {
		u, err := url.Parse(strings.TrimRight(b.raw, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &Error{Class: Invalid, Message: fmt.Sprintf("network: %s must be an http(s) URL with a host (got %q)", b.key, b.raw)}
		}
		u.RawQuery, u.Fragment, u.RawPath = "", "", ""
		*b.dst = u
	}
	if cfg.Tokens == nil {
		return nil, &Error{Class: Invalid, Message: "network: no token source; give a token or identity credentials"}
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
	c.cfg = cfg
	// The retry policy (doc.go, Retries): every call is a GET, sent again
	// after 429, 5xx and connection failures, and once after a 401 with a
	// fresh token.
	c.policy = httpcall.Policy{
		Attempts: cfg.MaxAttempts, Backoff: baseBackoff, MaxBackoff: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Repeat: httpcall.Safe, Refresh: httpcall.RefreshToken(cfg.Tokens, HeaderToken),
		Client: cfg.HTTPClient, Sleep: cfg.Sleep, Now: cfg.Now,
	}
	return c, nil
}

// NetworkURL and ImageURL return the addresses calls go to (no trailing
// slash).
func (c *Client) NetworkURL() string { return c.network.String() }

// ImageURL: see NetworkURL.
func (c *Client) ImageURL() string { return c.image.String() }

// get sends GET base+pathQuery and decodes a 2xx answer into out.
func (c *Client) get(ctx context.Context, base *url.URL, pathQuery string, out any) error {
	op := "GET " + pathQuery
	_, err := httpcall.Do(ctx, c.policy, httpcall.Call{
		Op: op,
		Request: func(ctx context.Context) (*http.Request, error) {
			token, err := c.cfg.Tokens.Token(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+pathQuery, nil)
			if err != nil {
				return nil, &Error{Class: Invalid, Op: op, Err: err}
			}
			req.Header.Set("Accept", "application/json")
			req.Header.Set(HeaderToken, token)
			return req, nil
		},
		Read: func(resp *http.Response) error {
			defer resp.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
			if err != nil {
				return err // the loop's: a cut answer is a connection failure
			}
			if err := json.Unmarshal(raw, out); err != nil {
				return &Error{Class: Internal, Op: op, Status: resp.StatusCode, Message: "decoding the answer", Err: err}
			}
			return nil
		},
		Failed: func(resp *http.Response, raw []byte) error {
			e := parseError(op, resp.StatusCode, raw)
			e.RetryAfter = retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())
			return e
		},
	})
	return err
}

// Class classifies an Error for the retry policy and for users. The values
// are spelled as the step error codes they stand for.
type Class string

const (
	Invalid      Class = "invalid"      // bad settings or request; never retried
	NotFound     Class = "not_found"    // the network, subnet or image does not exist
	Unauthorized Class = "unauthorized" // missing or refused token
	Throttled    Class = "throttled"    // 429
	Unavailable  Class = "unavailable"  // 5xx, network errors
	Internal     Class = "internal"     // an answer that cannot be read
)

// Error is an error of this package. Status is the HTTP status when the
// API answered (0 otherwise).
type Error struct {
	Class      Class
	Op         string // "GET /v2.0/networks?router:external=True"
	Status     int
	Type       string // Neutron's error type (NetworkNotFound, ...)
	Message    string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	var parts []string
	if e.Op != "" {
		parts = append(parts, e.Op)
	}
	if e.Status != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status)))
	}
	msg := strings.Join(parts, ": ")
	if m := strings.TrimSpace(e.Message); m != "" {
		if msg != "" && !strings.HasPrefix(e.Message, " ") {
			msg += ": "
		}
		msg += e.Message
	}
	if e.Err != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the Class of the first *Error in err's chain, else the
// code of its *fault.Error (a connection failure of the call loop, a token
// source's error), else "".
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return Class(fe.Code)
	}
	return ""
}

// classify maps an HTTP status to a Class.
func classify(status int) Class {
	switch {
	case status == http.StatusTooManyRequests:
		return Throttled
	case status >= 500:
		return Unavailable
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return Unauthorized
	case status >= 400:
		return Invalid
	}
	return Internal
}

// parseError reads a non-2xx answer: Neutron's
// {"NeutronError":{"type","message","detail"}}, Keystone's
// {"error":{"message"}}, Glance's plain text, or anything else as a snippet.
func parseError(op string, status int, raw []byte) *Error {
	e := &Error{Class: classify(status), Op: op, Status: status}
	var body struct {
		NeutronError *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Detail  string `json:"detail"`
		} `json:"NeutronError"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil {
		switch {
		case body.NeutronError != nil:
			e.Type, e.Message = body.NeutronError.Type, body.NeutronError.Message
			return e
		case body.Error != nil && body.Error.Message != "":
			e.Message = body.Error.Message
			return e
		case body.Message != "":
			e.Message = body.Message
			return e
		}
	}
	e.Message = snippet(raw)
	return e
}

// snippet is the first 300 characters of a text answer on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
