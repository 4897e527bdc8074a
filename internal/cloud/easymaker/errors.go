package easymaker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

// APIError is an answer of the service that failed: a non-2xx status, or
// a 2xx whose envelope header says isSuccessful false. ResultCode and
// ResultMessage come from the header when there is one.
type APIError struct {
	Op            string // "POST /v1.0/appkeys/.../trainings" without the query
	HTTPStatus    int
	ResultCode    int
	ResultMessage string
	RetryAfter    time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("easymaker: %s: HTTP %d", e.Op, e.HTTPStatus)
	if e.ResultCode != 0 {
		msg += fmt.Sprintf(" (resultCode %d)", e.ResultCode)
	}
	if e.ResultMessage != "" {
		msg += ": " + e.ResultMessage
	} else {
		msg += " " + http.StatusText(e.HTTPStatus)
	}
	return msg
}

// StepCode classifies the error by its HTTP status
// (fault.CodeForHTTPStatus); a 2xx answer that is not successful is
// invalid.
func (e *APIError) StepCode() fault.Code {
	if e.HTTPStatus/100 == 2 {
		return fault.Invalid
	}
	return fault.CodeForHTTPStatus(e.HTTPStatus)
}

func (e *APIError) stepsError() *fault.Error {
	return &fault.Error{Code: e.StepCode(), Err: e, Data: map[string]any{
		"http_status": e.HTTPStatus, "result_code": e.ResultCode, "result_message": e.ResultMessage,
	}}
}

func parseAPIError(op string, status int, raw []byte) *APIError {
	e := &APIError{Op: op, HTTPStatus: status}
	var env struct {
		Header *Header `json:"header"`
		// The token endpoint and gateways answer other shapes.
		Error            any    `json:"error"`
		ErrorDescription string `json:"error_description"`
		Message          string `json:"message"`
	}
	if json.Unmarshal(raw, &env) != nil {
		e.ResultMessage = snippet(raw)
		return e
	}
	switch {
	case env.Header != nil:
		e.ResultCode, e.ResultMessage = env.Header.ResultCode, env.Header.ResultMessage
	case env.ErrorDescription != "":
		e.ResultMessage = env.ErrorDescription
	case env.Message != "":
		e.ResultMessage = env.Message
	case env.Error != nil:
		e.ResultMessage = fmt.Sprint(env.Error)
	default:
		e.ResultMessage = snippet(raw)
	}
	return e
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
