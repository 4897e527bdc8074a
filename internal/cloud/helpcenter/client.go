package helpcenter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/cloud/httpcall"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/retry"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the help center's address (https://{domain}.oc.nhncloud.com,
	// or a simulator's http://127.0.0.1:PORT/helpcenter); paths are appended.
	BaseURL     string
	ServiceID   string
	OrgID       string
	SecurityKey string
	// Language is sent when a call names none ("" sends nothing: the help
	// center's default language).
	Language   string
	HTTPClient *http.Client
	// Now gives the signature timestamp (default time.Now).
	Now func() time.Time
	// Location is where display times are read (default Asia/Seoul).
	Location *time.Location
	// MaxAttempts bounds the attempts of one call, retries included
	// (default 4; 1 disables retries).
	MaxAttempts int
	// Sleep waits between attempts (default: a timer cut short by ctx).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client calls the help-center notice API. It is safe for concurrent use.
type Client struct {
	cfg    Config
	base   *url.URL
	policy httpcall.Policy
}

// Backoff bounds: the first retry waits up to baseBackoff, doubling up to
// maxBackoff; a Retry-After longer than maxRetryAfter is cut to it.
const (
	baseBackoff   = 200 * time.Millisecond
	maxBackoff    = 5 * time.Second
	maxRetryAfter = 60 * time.Second
	maxErrorBody  = 64 << 10
)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Errorf(fault.Invalid, "helpcenter: base URL must be an http(s) URL with a host (got %q)", cfg.BaseURL)
	}
	if strings.TrimSpace(cfg.ServiceID) == "" {
		return nil, fault.Errorf(fault.Invalid, "helpcenter: service ID is empty")
	}
	if strings.ContainsAny(cfg.ServiceID, "/?#") {
		return nil, fault.Errorf(fault.Invalid, "helpcenter: service ID %q must not contain '/', '?' or '#'", cfg.ServiceID)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = Seoul()
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	u.RawQuery, u.Fragment = "", ""
	// The retry policy (doc.go, Retries): every operation is a GET, sent
	// again after 429, 5xx (status or result code) and connection failures.
	// The signature is no token: there is nothing to refresh.
	policy := httpcall.Policy{
		Attempts: cfg.MaxAttempts, Backoff: baseBackoff, MaxBackoff: maxBackoff, MaxRetryAfter: maxRetryAfter,
		Repeat: httpcall.Safe, Client: cfg.HTTPClient, Sleep: cfg.Sleep, Now: cfg.Now,
	}
	return &Client{cfg: cfg, base: u, policy: policy}, nil
}

// ConfigFrom reads a runbook connection map: base_url and service_id
// (required), org_id and security_key (required by the notice list only),
// language (default "ko").
func ConfigFrom(conn map[string]any) (Config, error) {
	var cfg Config
	get := func(key string) (string, error) {
		v, ok := conn[key]
		if !ok || v == nil {
			return "", nil
		}
		switch v := v.(type) {
		case string:
			return strings.TrimSpace(v), nil
		case int, int64, float64, uint64, json.Number:
			return fmt.Sprint(v), nil
		}
		return "", fault.Errorf(fault.Invalid, "helpcenter connection: %s must be a string (got %T)", key, v)
	}
	var err error
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{
		{"base_url", &cfg.BaseURL, true},
		{"service_id", &cfg.ServiceID, true},
		{"org_id", &cfg.OrgID, false},
		{"security_key", &cfg.SecurityKey, false},
		{"language", &cfg.Language, false},
	} {
		if *f.dst, err = get(f.key); err != nil {
			return Config{}, err
		}
		if f.required && *f.dst == "" {
			return Config{}, fault.Errorf(fault.Invalid, "helpcenter connection: %s is missing", f.key)
		}
	}
	if cfg.Language == "" {
		cfg.Language = "ko"
	}
	return cfg, nil
}

// ServiceID returns the configured service identifier.
func (c *Client) ServiceID() string { return c.cfg.ServiceID }

// BaseURL returns the configured base address (no trailing slash).
func (c *Client) BaseURL() string { return c.base.String() }

// APIError is an answer of the API that is not a success: a JSON envelope
// with header.isSuccessful false, or a non-2xx HTTP status.
type APIError struct {
	Op            string // "GET /{serviceId}/api/v2/notice/list.json"
	HTTPStatus    int
	ResultCode    int // envelope header.resultCode (0 when no envelope)
	ResultMessage string
	RetryAfter    time.Duration // from a Retry-After header
}

func (e *APIError) Error() string {
	msg := e.ResultMessage
	if msg == "" {
		msg = http.StatusText(e.HTTPStatus)
	}
	if e.ResultCode != 0 {
		return fmt.Sprintf("%s: result code %d: %s (HTTP %d)", e.Op, e.ResultCode, msg, e.HTTPStatus)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.HTTPStatus, msg)
}

// Code classifies the error for the retry policy and for users. The result
// code wins over the HTTP status. A 400 is a bad request unless it is about
// the common authentication (Authorization blank, timestamp not numeric or
// expired, signature wrong): the API gives those the same code 400, so the
// message is the only thing that tells them apart.
func (e *APIError) Code() fault.Code {
	code := e.ResultCode
	if code == 0 || code == 200 {
		code = e.HTTPStatus
	}
	switch {
	case code == 400:
		if authProblem(e.ResultMessage) {
			return fault.Unauthorized
		}
		return fault.Invalid
	case code == 401 || code == 403:
		return fault.Unauthorized
	case code == 404 || code == 9005 || code == 410:
		return fault.NotFound
	case code == 409:
		return fault.Conflict
	case code == 429:
		return fault.Throttled
	case code >= 500 && code <= 599:
		return fault.Unavailable
	case code >= 400 && code <= 499:
		return fault.Invalid
	}
	return fault.Internal
}

func authProblem(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"authori", "signature", "timestamp", "x-tc-", "hmac", "access denied"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// classify wraps err as a *fault.Error with its code (and, for an
// *APIError, its result code in Data).
func classify(err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		return &fault.Error{Code: ae.Code(), Err: err, Data: map[string]any{
			"http_status": ae.HTTPStatus, "result_code": ae.ResultCode, "result_message": ae.ResultMessage,
		}}
	}
	return err
}

type envelope struct {
	Header struct {
		ResultCode    int    `json:"resultCode"`
		ResultMessage string `json:"resultMessage"`
		IsSuccessful  bool   `json:"isSuccessful"`
	} `json:"header"`
	Result json.RawMessage `json:"result"`
}

// getJSON performs a GET of path (below the base URL) and decodes the
// envelope's result into out.
func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.get(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	op := "GET " + path
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return &fault.Error{Code: fault.Unavailable, Message: op + ": reading the response", Err: err}
	}
	if out != nil && len(env.Result) > 0 && string(env.Result) != "null" {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return &fault.Error{Code: fault.Internal, Message: op + ": decoding the result", Err: err}
		}
	}
	return nil
}

// get sends a GET and returns a 2xx response whose envelope, if it is
// JSON, was successful. The caller closes the body.
func (c *Client) get(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	op := "GET " + path
	return httpcall.Do(ctx, c.policy, httpcall.Call{
		Op:      op,
		Request: func(ctx context.Context) (*http.Request, error) { return c.request(ctx, op, path, q) },
		Read:    func(resp *http.Response) error { return c.checkEnvelope(op, resp) },
		Failed: func(resp *http.Response, body []byte) error {
			ae := c.apiError(op, resp)
			ae.ResultMessage = snippet(body)
			if env, ok := readEnvelope(resp, body); ok {
				ae.ResultCode, ae.ResultMessage = env.Header.ResultCode, env.Header.ResultMessage
			}
			return classify(ae)
		},
	})
}

// request builds a signed GET: the signature's timestamp is the attempt's.
func (c *Client) request(ctx context.Context, op, path string, q url.Values) (*http.Request, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: op, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if c.cfg.SecurityKey != "" {
		ts := c.cfg.Now().UnixMilli()
		// The signed path is the API's own (/{serviceId}/api/v2/...), as the
		// real host at the root of its domain sees it: a base URL's path
		// (a simulator's /helpcenter mount) is not part of it.
		signed := strings.TrimPrefix(req.URL.EscapedPath(), c.base.EscapedPath())
		req.Header.Set("Authorization", Sign(c.cfg.SecurityKey, c.cfg.OrgID, signed, q, ts))
		req.Header.Set("X-TC-Timestamp", strconv.FormatInt(ts, 10))
	}
	return req, nil
}

// checkEnvelope reads a 2xx answer. A file is left unread for the caller;
// a JSON answer must be a successful envelope, which is buffered back into
// the body. An unsuccessful one is classified by its result code (a 500
// in a 200 answer is repeated like a 5xx).
func (c *Client) checkEnvelope(op string, resp *http.Response) error {
	if !isJSON(resp) {
		return nil // a file
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	resp.Body.Close()
	if err != nil {
		return &fault.Error{Code: fault.Unavailable, Message: op + ": reading the response", Err: err}
	}
	env, ok := readEnvelope(resp, body)
	switch {
	case ok && env.Header.IsSuccessful:
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return nil
	case ok:
		ae := c.apiError(op, resp)
		ae.ResultCode, ae.ResultMessage = env.Header.ResultCode, env.Header.ResultMessage
		return classify(ae)
	}
	return &fault.Error{Code: fault.Internal, Message: op + ": the answer is not a result envelope: " + snippet(body)}
}

func (c *Client) apiError(op string, resp *http.Response) *APIError {
	return &APIError{Op: op, HTTPStatus: resp.StatusCode, RetryAfter: retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())}
}

func isJSON(resp *http.Response) bool {
	return strings.Contains(strings.ToLower(resp.Header.Get("Content-Type")), "json")
}

// readEnvelope reads body as the API's envelope (ok: it is one).
func readEnvelope(resp *http.Response, body []byte) (envelope, bool) {
	var env envelope
	ok := isJSON(resp) && json.Unmarshal(body, &env) == nil && (env.Header.ResultCode != 0 || env.Header.IsSuccessful)
	return env, ok
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
