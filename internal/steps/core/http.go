package core

import (
	"bytes"
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
	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type basicAuth struct {
	Username string `json:"username" required:"true"`
	Password string `json:"password"`
}

type httpParams struct {
	Method           string            `json:"method" enum:"GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS" default:"GET" desc:"HTTP method"`
	URL              string            `json:"url" required:"true" format:"uri" desc:"http or https URL"`
	Headers          map[string]string `json:"headers" desc:"request headers"`
	Query            map[string]string `json:"query" desc:"query parameters added to the URL"`
	JSON             any               `json:"json" desc:"request body sent as JSON (sets Content-Type)"`
	Body             string            `json:"body" desc:"raw request body"`
	Form             map[string]string `json:"form" desc:"request body sent as a URL-encoded form"`
	ExpectStatus     []int             `json:"expect_status" min:"100" max:"599" desc:"accepted status codes (default: any 2xx)"`
	Timeout          steps.Duration    `json:"timeout" default:"30s" max:"24h" desc:"limit for the whole exchange, body included"`
	MaxResponseBytes int64             `json:"max_response_bytes" default:"10485760" min:"0" max:"104857600" desc:"response body bytes kept; the rest is dropped"`
	FollowRedirects  bool              `json:"follow_redirects" default:"true" desc:"follow up to 10 redirects"`
	BasicAuth        *basicAuth        `json:"basic_auth" desc:"HTTP basic authentication"`
	BearerToken      string            `json:"bearer_token" desc:"sent as Authorization: Bearer"`
	IdempotencyKey   bool              `json:"idempotency_key" desc:"send an Idempotency-Key header that is stable across retries and resumes"`
}

func init() {
	steps.Register(steps.Define(steps.Def[httpParams]{
		Type: "http.request",
		Summary: "Make an HTTP request. A status outside expect_status fails with a code " +
			"classified from the status (429 throttled, 5xx unavailable, ...). Retries re-send the request: " +
			"use idempotency_key for non-idempotent methods. A connection is kept for the calls that follow " +
			"to the same host (keep-alive, idle for at most 4 s).",
		Example: map[string]any{
			"url":           "https://hooks.example.com/deploys",
			"method":        "POST",
			"json":          map[string]any{"text": "prod-1 upgraded to v1.29"},
			"expect_status": []any{200, 202},
		},
		Outputs: []steps.Output{
			{Name: "status", Type: "integer", Description: "HTTP status code"},
			{Name: "headers", Type: "map", Description: "response headers (first value of each, canonical names)"},
			{Name: "body", Type: "string", Description: "response body, up to max_response_bytes"},
			{Name: "json", Type: "any", Description: "the body parsed as JSON, or null"},
			{Name: "truncated", Type: "boolean", Description: "whether the body exceeded max_response_bytes"},
			{Name: "duration_ms", Type: "integer", Description: "time the exchange took"},
		},
		Check: checkHTTP,
		Run:   runHTTP,
	}))
}

func checkHTTP(p *httpParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	bodies := 0
	for _, b := range []struct {
		name string
		set  bool
	}{{"json", p.JSON != nil}, {"body", p.Body != ""}, {"form", p.Form != nil}} {
		if b.set || dynamic[b.name] {
			bodies++
			if bodies > 1 {
				out = append(out, fault.Problem{Path: b.name, Message: "only one of json, body and form may be given"})
			}
		}
	}
	if (p.BasicAuth != nil || dynamic["basic_auth"]) && (p.BearerToken != "" || dynamic["bearer_token"]) {
		out = append(out, fault.Problem{Path: "bearer_token", Message: "cannot be used with basic_auth"})
	}
	if !dynamic["url"] && p.URL != "" {
		if u, err := url.Parse(p.URL); err == nil && u.Scheme != "http" && u.Scheme != "https" {
			out = append(out, fault.Problem{Path: "url", Message: fmt.Sprintf("must be an http or https URL (got scheme %q)", u.Scheme)})
		}
	}
	return out
}

func runHTTP(ctx context.Context, c *steps.Call, p *httpParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, p.Timeout.Std())
	defer cancel()
	req, err := newRequest(rctx, c, p)
	if err != nil {
		return nil, err
	}
	// The process's shared transport: a connection to a host is reused
	// by the calls that follow (keep-alive). The destination policy
	// (config http:) is checked by the request's host and at dial time.
	client := &http.Client{Transport: egress.Shared(), CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if !p.FollowRedirects {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}

	start := time.Now()
	resp, err := client.Do(req)
	// The call goes to the step's output: method, host and path (no
	// query, no user info), status, duration.
	call := httpcall.Attempt{Method: req.Method, Path: req.URL.Host + req.URL.EscapedPath(), Took: time.Since(start), N: 1}
	if resp != nil {
		call.Status = resp.StatusCode
	}
	c.Print(steps.StreamCall, call.String())
	if err != nil {
		return nil, requestError(ctx, rctx, p, err)
	}
	defer resp.Body.Close()
	body, truncated, err := readCapped(resp.Body, p.MaxResponseBytes)
	if err != nil {
		return nil, requestError(ctx, rctx, p, fmt.Errorf("read response body: %w", err))
	}
	out := steps.Outputs{
		"status":      resp.StatusCode,
		"headers":     firstValues(resp.Header),
		"body":        string(body),
		"json":        parseJSONBody(resp.Header.Get("Content-Type"), body, truncated),
		"truncated":   truncated,
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if !statusExpected(resp.StatusCode, p.ExpectStatus) {
		return out, statusError(p, resp, body)
	}
	return out, nil
}

func newRequest(ctx context.Context, c *steps.Call, p *httpParams) (*http.Request, error) {
	u, err := url.Parse(p.URL)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "url", Err: err}
	}
	if len(p.Query) > 0 {
		q := u.Query()
		for k, v := range p.Query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	contentType := ""
	switch {
	case p.JSON != nil:
		b, err := json.Marshal(p.JSON)
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: "json: cannot encode", Err: err}
		}
		body, contentType = bytes.NewReader(b), "application/json"
	case p.Form != nil:
		f := url.Values{}
		for k, v := range p.Form {
			f.Set(k, v)
		}
		body, contentType = strings.NewReader(f.Encode()), "application/x-www-form-urlencoded"
	case p.Body != "":
		body = strings.NewReader(p.Body)
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, u.String(), body)
	if err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Message: "build request", Err: err}
	}
	req.Header.Set("User-Agent", "runbook")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	switch {
	case p.BasicAuth != nil:
		req.SetBasicAuth(p.BasicAuth.Username, p.BasicAuth.Password)
	case p.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+p.BearerToken)
	}
	if p.IdempotencyKey {
		req.Header.Set("Idempotency-Key", c.IdempotencyKey)
	}
	for k, v := range p.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return req, nil
}

// requestError classifies a failed exchange: the run's cancellation stays
// a context error, the step's own timeout is Timeout, anything else on the
// network is Unavailable.
func requestError(ctx, rctx context.Context, p *httpParams, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	target := p.Method + " " + redactURL(p.URL)
	if rctx.Err() != nil {
		return &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("%s: no complete response within %s", target, p.Timeout), Err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if re := (*egress.RefusedError)(nil); errors.As(err, &re) {
		return &fault.Error{Code: fault.Invalid, Message: target + ": " + re.Error()}
	}
	return &fault.Error{Code: fault.Unavailable, Message: target, Err: err}
}

// redactURL drops user info and the query, which may carry credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// readCapped reads up to max bytes and reports whether more were there.
// The rest of the body is not read: the transport is closed anyway.
func readCapped(r io.Reader, max int64) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, nil
}

func firstValues(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

// parseJSONBody parses body when the content type says JSON or the body
// looks like a JSON document; otherwise (or when it does not parse) nil.
func parseJSONBody(contentType string, body []byte, truncated bool) any {
	if truncated {
		return nil
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	if !strings.Contains(strings.ToLower(contentType), "json") && trimmed[0] != '{' && trimmed[0] != '[' {
		return nil
	}
	var v any
	if json.Unmarshal(trimmed, &v) != nil {
		return nil
	}
	return v
}

func statusExpected(status int, expect []int) bool {
	if len(expect) == 0 {
		return status >= 200 && status <= 299
	}
	for _, s := range expect {
		if s == status {
			return true
		}
	}
	return false
}

const errorBodyBytes = 1024

func statusError(p *httpParams, resp *http.Response, body []byte) error {
	b := body
	if len(b) > errorBodyBytes {
		b = b[:errorBodyBytes]
	}
	return &fault.Error{
		Code:    fault.CodeForHTTPStatus(resp.StatusCode),
		Message: fmt.Sprintf("%s %s: unexpected status %s", p.Method, redactURL(p.URL), resp.Status),
		Data:    map[string]any{"status": resp.StatusCode, "body": string(b)},
	}
}
