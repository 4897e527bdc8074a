package nks

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// APIError is a non-2xx answer of the cluster API, read from the
// Magnum error body
//
//	{"errors":[{"request_id":"","code":"client","status":400,"title":"Bad Request","detail":"...","links":[]}]}
//
// (spec/FIDELITY.md). Answers without that body keep the HTTP status and
// a snippet of the text as Detail.
type APIError struct {
	Op         string // "POST /v1/clusters"
	Status     int    // HTTP status (the body's status when it is absent)
	Code       string // "client" or "server"
	Title      string
	Detail     string
	RequestID  string
	RetryAfter time.Duration // from a Retry-After header
}

func (e *APIError) Error() string {
	title := e.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	msg := fmt.Sprintf("%s: HTTP %d %s", e.Op, e.Status, title)
	if e.Detail != "" && e.Detail != title {
		msg += ": " + e.Detail
	}
	if e.Status == http.StatusNotAcceptable {
		msg += " (the service wants the version header " + HeaderOpenStackVersion + ": " + APIVersion + ")"
	}
	return msg
}

// StepCode classifies the error for the retry policy and for users:
// 429 throttled; 5xx unavailable; 404 not_found; 409 conflict (a name that
// exists); 400 in_progress when the detail says another operation is in
// progress on the cluster or group, else invalid; 401 and 403
// unauthorized; 406 (no version header) and other 4xx invalid.
//
// The service answers 400 both for a bad request and for "an operation is
// already in progress" (spec/FIDELITY.md), so the detail text is the only
// thing that tells them apart; InProgressDetail is the test.
func (e *APIError) StepCode() fault.Code {
	switch s := e.Status; {
	case s == http.StatusTooManyRequests:
		return fault.Throttled
	case s >= 500:
		return fault.Unavailable
	case s == http.StatusNotFound:
		return fault.NotFound
	case s == http.StatusConflict:
		return fault.Conflict
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return fault.Unauthorized
	case s == http.StatusBadRequest && InProgressDetail(e.Detail+" "+e.Title):
		return fault.InProgress
	case s >= 400:
		return fault.Invalid
	}
	return fault.Internal
}

// InProgressDetail reports whether an error detail says that another
// operation is running on the resource ("... is in progress",
// "UPDATE_IN_PROGRESS", "operation is already running").
func InProgressDetail(detail string) bool {
	d := strings.ToLower(detail)
	for _, w := range []string{"in progress", "in_progress", "in-progress", "already running", "another operation", "is being updated", "is busy"} {
		if strings.Contains(d, w) {
			return true
		}
	}
	return false
}

// stepsError wraps e as a *fault.Error carrying its code; Data holds the
// status, title and detail for expressions (steps.<id>.error.data).
func (e *APIError) stepsError() *fault.Error {
	return &fault.Error{Code: e.StepCode(), Err: e, Data: map[string]any{
		"http_status": e.Status, "code": e.Code, "title": e.Title, "detail": e.Detail,
	}}
}

type magnumErrors struct {
	Errors []struct {
		RequestID string `json:"request_id"`
		Code      string `json:"code"`
		Status    any    `json:"status"`
		Title     string `json:"title"`
		Detail    string `json:"detail"`
	} `json:"errors"`
	// Older Magnum/pecan answers: {"error_message": "<json with faultstring>"}.
	ErrorMessage json.RawMessage `json:"error_message"`
	// Keystone-style answers from a gateway: {"error": {"message": ...}}.
	Error *struct {
		Title   string `json:"title"`
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// parseAPIError reads a non-2xx answer.
func parseAPIError(op string, status int, raw []byte) *APIError {
	e := &APIError{Op: op, Status: status}
	var m magnumErrors
	if json.Unmarshal(raw, &m) != nil {
		e.Detail = snippet(raw)
		return e
	}
	switch {
	case len(m.Errors) > 0:
		first := m.Errors[0]
		e.Code, e.Title, e.Detail, e.RequestID = first.Code, first.Title, first.Detail, first.RequestID
	case len(m.ErrorMessage) > 0:
		e.Detail = faultString(m.ErrorMessage)
	case m.Error != nil:
		e.Title, e.Detail = m.Error.Title, m.Error.Message
	case m.Message != "":
		e.Detail = m.Message
	default:
		e.Detail = snippet(raw)
	}
	return e
}

// faultString reads pecan's error_message: a string that may itself hold
// JSON with a faultstring, or an object with one.
func faultString(raw json.RawMessage) string {
	var fault struct {
		FaultString string `json:"faultstring"`
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if json.Unmarshal([]byte(s), &fault) == nil && fault.FaultString != "" {
			return fault.FaultString
		}
		return s
	}
	if json.Unmarshal(raw, &fault) == nil && fault.FaultString != "" {
		return fault.FaultString
	}
	return snippet(raw)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
