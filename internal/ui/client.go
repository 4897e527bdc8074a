package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/api"
)

// APIError is an error answer of the API.
type APIError struct {
	Status int
	api.ErrorBody
}

func (e *APIError) Error() string {
	if len(e.Problems) > 0 {
		return e.ErrorBody.Error + ": " + strings.Join(e.Problems, "; ")
	}
	return e.ErrorBody.Error
}

// answer buffers an in-process answer of the API.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.header }
func (a *answer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *answer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

// apiRequest builds a request of the API as the session's source.
func apiRequest(ctx context.Context, s *session, method, path string, in any) (*http.Request, error) {
	ctx = WithSource(ctx, s.source())
	var body *bytes.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://runbook.ui"+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.RemoteAddr = "127.0.0.1:0"
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// call sends one API request in process and decodes the answer into out
// (when not nil). An error answer is an *APIError.
func (u *UI) call(ctx context.Context, s *session, method, path string, in, out any) error {
	req, err := apiRequest(ctx, s, method, path, in)
	if err != nil {
		return err
	}
	a := &answer{header: http.Header{}}
	u.o.API.ServeHTTP(a, req)
	if a.status >= 400 {
		e := &APIError{Status: a.status}
		if err := json.Unmarshal(a.body.Bytes(), &e.ErrorBody); err != nil || e.ErrorBody.Error == "" {
			e.ErrorBody = api.ErrorBody{Error: fmt.Sprintf("%s %s answered %d", method, path, a.status), Code: "internal"}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(a.body.Bytes(), out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// get is call for a GET.
func (u *UI) get(ctx context.Context, s *session, path string, out any) error {
	return u.call(ctx, s, http.MethodGet, path, nil, out)
}

// text fetches a non-JSON answer of the API (the metrics).
func (u *UI) text(ctx context.Context, s *session, path string) (string, error) {
	req, err := apiRequest(ctx, s, http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	a := &answer{header: http.Header{}}
	u.o.API.ServeHTTP(a, req)
	if a.status >= 400 {
		return "", &APIError{Status: a.status, ErrorBody: api.ErrorBody{Error: fmt.Sprintf("GET %s answered %d", path, a.status)}}
	}
	return a.body.String(), nil
}
