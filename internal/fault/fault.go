package fault

import (
	"context"
	"errors"
	"fmt"
)

// Code classifies an error for users (CLI exit codes, HTTP status) and for
// the retry policy. One table, codeInfo, maps each code to both.
type Code string

const (
	Invalid      Code = "invalid"      // bad params or request; never retried
	NotFound     Code = "not_found"    // the resource does not exist
	Conflict     Code = "conflict"     // duplicate name, state conflict
	InProgress   Code = "in_progress"  // another operation runs on the resource
	Unauthorized Code = "unauthorized" // missing or bad credentials
	Throttled    Code = "throttled"    // 429 / rate limits; retryable
	Unavailable  Code = "unavailable"  // 5xx, connection errors; retryable
	Timeout      Code = "timeout"      // a step or wait deadline passed; retryable
	Failed       Code = "failed"       // the operation ran and failed (task FAIL, exit code)
	Cancelled    Code = "cancelled"    // the run was cancelled
	Internal     Code = "internal"     // a bug or unexpected condition
)

type codeInfo struct {
	retryable bool
	exit      int
	http      int
}

var codes = map[Code]codeInfo{
	Invalid:      {false, 2, 400},
	NotFound:     {false, 1, 404},
	Conflict:     {false, 1, 409},
	InProgress:   {true, 1, 409},
	Unauthorized: {false, 1, 401},
	Throttled:    {true, 1, 429},
	Unavailable:  {true, 1, 503},
	Timeout:      {true, 1, 504},
	Failed:       {false, 1, 500},
	Cancelled:    {false, 1, 499},
	Internal:     {false, 1, 500},
}

// Error is a classified step error.
type Error struct {
	Code    Code
	Message string
	// Data carries structured details (an API's result code, a task's
	// contents) that expressions can read as steps.<id>.error.data.
	Data map[string]any
	Err  error
	// whole says Message already ends with Err's text (Errorf with %w).
	whole bool
}

func (e *Error) Error() string {
	switch {
	case e.whole:
		return e.Message
	case e.Message != "" && e.Err != nil:
		return e.Message + ": " + e.Err.Error()
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return e.Err.Error()
	}
	return string(e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns a classified error with a formatted message. A %w verb
// wraps as fmt.Errorf does.
func Errorf(code Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	cause := errors.Unwrap(err)
	return &Error{Code: code, Message: err.Error(), Err: cause, whole: cause != nil}
}

// CodeOf returns the code of err: the first *Error in its chain, Cancelled
// or Timeout for context errors, Internal otherwise. nil has no code ("").
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	if errors.Is(err, ErrSuspended) {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return Cancelled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout
	}
	return Internal
}

// Retryable reports whether the default retry policy retries err.
func Retryable(err error) bool { return codes[CodeOf(err)].retryable }

// ExitCode maps err to the CLI exit code (0 for nil).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if c, ok := codes[CodeOf(err)]; ok {
		return c.exit
	}
	return 1
}

// HTTPStatus maps err to an HTTP status (200 for nil).
func HTTPStatus(err error) int {
	if err == nil {
		return 200
	}
	if c, ok := codes[CodeOf(err)]; ok {
		return c.http
	}
	return 500
}

// CodeForHTTPStatus classifies an unexpected HTTP status for the retry
// policy: 429 throttled, 5xx unavailable, 401/403 unauthorized, 404 not
// found, 409 conflict, 408 timeout, other 4xx invalid, anything else
// (an unexpected 1xx/2xx/3xx) failed.
func CodeForHTTPStatus(status int) Code {
	switch {
	case status == 429:
		return Throttled
	case status >= 500:
		return Unavailable
	case status == 401 || status == 403:
		return Unauthorized
	case status == 404:
		return NotFound
	case status == 409:
		return Conflict
	case status == 408:
		return Timeout
	case status >= 400:
		return Invalid
	}
	return Failed
}

// ErrSuspended is returned by Host.AwaitApproval when the run must park and
// continue later (the CLI without a server). The engine persists the run as
// waiting; it is not a failure.
var ErrSuspended = errors.New("run suspended until answered")

// Problem is one validation finding about params. Path is the JSON path
// below `with` ("node_count", "json.text", "labels[2]"); the loader maps it
// to a file position.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) Error() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ProblemsError joins problems found at run time into one Invalid error.
func ProblemsError(step string, ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	msg := ps[0].Error()
	for _, p := range ps[1:] {
		msg += "; " + p.Error()
	}
	return &Error{Code: Invalid, Message: fmt.Sprintf("%s: invalid params: %s", step, msg)}
}
