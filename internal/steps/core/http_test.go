package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// seen is what the test server received.
type seen struct {
	Method, Path, Query, Body, ContentType, Auth, IdemKey, Custom, Host string
}

func echoServer(t *testing.T) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Content-Type"),
			r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("X-Custom"), r.Host}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "first")
		w.Header().Add("X-Multi", "second")
		fmt.Fprint(w, `{"ok":true,"n":3}`)
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		var code int
		fmt.Sscan(r.PathValue("code"), &code)
		w.WriteHeader(code)
		fmt.Fprint(w, strings.Repeat("e", 2000))
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "hello world")
	})
	mux.HandleFunc("/jsonish", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, `[1, 2]`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/text", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, got
}

func runHTTP(t *testing.T, with map[string]any) (steps.Outputs, error) {
	t.Helper()
	d := desc(t, "http.request")
	return d.Run(context.Background(), stepstest.NewCall(t, d, with))
}

func TestHTTPRequest(t *testing.T) {
	srv, got := echoServer(t)

	t.Run("a GET returns status, headers, body and parsed JSON", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/echo", "query": map[string]any{"q": "a b"}})
		require.NoError(t, err)
		assert.Equal(t, 200, out["status"])
		assert.Equal(t, `{"ok":true,"n":3}`, out["body"])
		assert.Equal(t, map[string]any{"ok": true, "n": 3.0}, out["json"])
		assert.Equal(t, "first", out["headers"].(map[string]any)["X-Multi"], "headers keep the first value")
		assert.Equal(t, false, out["truncated"])
		assert.IsType(t, int64(0), out["duration_ms"])
		s := <-got
		assert.Equal(t, "GET", s.Method)
		assert.Equal(t, "q=a+b", s.Query)
	})
	t.Run("a POST sends JSON with its content type", func(t *testing.T) {
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/echo", "method": "POST", "json": map[string]any{"text": "hi"}})
		require.NoError(t, err)
		s := <-got
		assert.Equal(t, "POST", s.Method)
		assert.Equal(t, "application/json", s.ContentType)
		assert.JSONEq(t, `{"text":"hi"}`, s.Body)
	})
	t.Run("a form is URL-encoded", func(t *testing.T) {
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/echo", "method": "PUT", "form": map[string]any{"a": "1 2"}})
		require.NoError(t, err)
		s := <-got
		assert.Equal(t, "application/x-www-form-urlencoded", s.ContentType)
		assert.Equal(t, "a=1+2", s.Body)
	})
	t.Run("a raw body and custom headers are sent as given", func(t *testing.T) {
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/echo", "method": "PATCH", "body": "raw",
			"headers": map[string]any{"X-Custom": "v", "Content-Type": "text/csv", "Host": "example.test"}})
		require.NoError(t, err)
		s := <-got
		assert.Equal(t, seen{Method: "PATCH", Path: "/echo", Body: "raw", ContentType: "text/csv", Custom: "v", Host: "example.test"}, s)
	})
	t.Run("basic auth, bearer token and idempotency key reach the server", func(t *testing.T) {
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/echo", "basic_auth": map[string]any{"username": "u", "password": "p"}, "idempotency_key": true})
		require.NoError(t, err)
		s := <-got
		assert.Equal(t, "Basic dTpw", s.Auth)
		assert.Equal(t, "run-test/step", s.IdemKey)
		_, err = runHTTP(t, map[string]any{"url": srv.URL + "/echo", "bearer_token": "tok"})
		require.NoError(t, err)
		assert.Equal(t, "Bearer tok", (<-got).Auth)
	})
	t.Run("a text body has no JSON output", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/text"})
		require.NoError(t, err)
		assert.Equal(t, "hello world", out["body"])
		assert.Nil(t, out["json"])
	})
	t.Run("a body that parses as JSON is parsed whatever its content type", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/jsonish"})
		require.NoError(t, err)
		assert.Equal(t, []any{1.0, 2.0}, out["json"])
	})
	t.Run("a body over max_response_bytes is cut and flagged", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/text", "max_response_bytes": 5})
		require.NoError(t, err)
		assert.Equal(t, "hello", out["body"])
		assert.Equal(t, true, out["truncated"])
	})
	t.Run("redirects are followed by default", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/redirect"})
		require.NoError(t, err)
		assert.Equal(t, "hello world", out["body"])
	})
	t.Run("a redirect is returned when following is off", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/redirect", "follow_redirects": false, "expect_status": []any{302}})
		require.NoError(t, err)
		assert.Equal(t, 302, out["status"])
	})
	t.Run("the step's timeout is reported as a timeout", func(t *testing.T) {
		start := time.Now()
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/slow", "timeout": "100ms"})
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err), "err: %v", err)
	})
	t.Run("a refused connection is unavailable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		_, err := runHTTP(t, map[string]any{"url": url})
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err), "err: %v", err)
		assert.True(t, fault.Retryable(err))
	})
}

func TestHTTPStatusClassification(t *testing.T) {
	srv, _ := echoServer(t)
	tests := []struct {
		status int
		code   fault.Code
	}{
		{429, fault.Throttled}, {500, fault.Unavailable}, {503, fault.Unavailable}, {401, fault.Unauthorized},
		{403, fault.Unauthorized}, {404, fault.NotFound}, {409, fault.Conflict}, {400, fault.Invalid}, {422, fault.Invalid},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("status %d fails with code %s", tt.status, tt.code), func(t *testing.T) {
			out, err := runHTTP(t, map[string]any{"url": fmt.Sprintf("%s/status/%d", srv.URL, tt.status)})
			var se *fault.Error
			require.True(t, errors.As(err, &se), "err: %v", err)
			assert.Equal(t, tt.code, se.Code)
			assert.Equal(t, tt.status, se.Data["status"])
			assert.Len(t, se.Data["body"], 1024, "the body in the error is cut to 1 KiB")
			assert.Contains(t, se.Message, fmt.Sprintf("unexpected status %d", tt.status))
			assert.Equal(t, tt.status, out["status"], "outputs are still returned")
		})
	}
	t.Run("an expected non-2xx status succeeds", func(t *testing.T) {
		out, err := runHTTP(t, map[string]any{"url": srv.URL + "/status/404", "expect_status": []any{200, 404}})
		require.NoError(t, err)
		assert.Equal(t, 404, out["status"])
	})
	t.Run("a 2xx outside expect_status fails", func(t *testing.T) {
		_, err := runHTTP(t, map[string]any{"url": srv.URL + "/status/204", "expect_status": []any{200}})
		assert.Error(t, err)
	})
}

func TestHTTPParams(t *testing.T) {
	d := desc(t, "http.request")
	tests := []struct {
		name string
		with map[string]any
		want []string
	}{
		{"json and body together are rejected", map[string]any{"url": "https://x.test", "json": map[string]any{}, "body": "b"},
			[]string{"body: only one of json, body and form may be given"}},
		{"a dynamic body still conflicts with json", map[string]any{"url": "https://x.test", "json": 1, "body": steps.Dynamic{}},
			[]string{"body: only one of json, body and form may be given"}},
		{"a non-http scheme is rejected", map[string]any{"url": "ftp://x.test/a"},
			[]string{`url: must be an http or https URL (got scheme "ftp")`}},
		{"a misspelt parameter gets a suggestion", map[string]any{"urll": "https://x.test"},
			[]string{"url: is required", `urll: unknown parameter "urll"; did you mean "url"?`}},
		{"an unknown method lists the methods", map[string]any{"url": "https://x.test", "method": "FETCH"},
			[]string{`method: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS (got "FETCH")`}},
		{"basic auth and a bearer token are exclusive", map[string]any{"url": "https://x.test", "bearer_token": "t", "basic_auth": map[string]any{"username": "u"}},
			[]string{"bearer_token: cannot be used with basic_auth"}},
		{"a dynamic url is accepted", map[string]any{"url": steps.Dynamic{}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range d.CheckLiteral(tt.with) {
				got = append(got, p.Error())
			}
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("the schema accepts an expression for expect_status", func(t *testing.T) {
		sch := stepstest.CompileSchema(t, d.ParamsSchema())
		var doc any
		require.NoError(t, json.Unmarshal([]byte(`{"url":"${{ env.URL }}","expect_status":"${{ inputs.codes }}","timeout":"${{ inputs.t }}"}`), &doc))
		assert.NoError(t, sch.Validate(doc))
	})
}
