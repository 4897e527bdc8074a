package fault_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/fault"
)

func TestEachCodeHasItsRetryExitAndHTTPStatus(t *testing.T) {
	cases := []struct {
		code      fault.Code
		retryable bool
		exit      int
		http      int
	}{
		{fault.Invalid, false, 2, 400},
		{fault.NotFound, false, 1, 404},
		{fault.Conflict, false, 1, 409},
		{fault.InProgress, true, 1, 409},
		{fault.Unauthorized, false, 1, 401},
		{fault.Throttled, true, 1, 429},
		{fault.Unavailable, true, 1, 503},
		{fault.Timeout, true, 1, 504},
		{fault.Failed, false, 1, 500},
		{fault.Cancelled, false, 1, 499},
		{fault.Internal, false, 1, 500},
	}
	for _, c := range cases {
		err := fault.Errorf(c.code, "boom")
		assert.Equal(t, c.retryable, fault.Retryable(err), c.code)
		assert.Equal(t, c.exit, fault.ExitCode(err), c.code)
		assert.Equal(t, c.http, fault.HTTPStatus(err), c.code)
	}
	assert.Equal(t, 0, fault.ExitCode(nil))
	assert.Equal(t, 200, fault.HTTPStatus(nil))
	assert.Equal(t, 1, fault.ExitCode(&fault.Error{Code: "unheard-of"}))
	assert.Equal(t, 500, fault.HTTPStatus(&fault.Error{Code: "unheard-of"}))
}

func TestCodeOfReadsTheChainAndContextErrors(t *testing.T) {
	wrapped := fmt.Errorf("step a: %w", fault.Errorf(fault.NotFound, "no cluster %q", "c1"))
	assert.Equal(t, fault.NotFound, fault.CodeOf(wrapped))
	assert.Equal(t, fault.Code(""), fault.CodeOf(nil))
	assert.Equal(t, fault.Cancelled, fault.CodeOf(fmt.Errorf("x: %w", context.Canceled)))
	assert.Equal(t, fault.Timeout, fault.CodeOf(context.DeadlineExceeded))
	assert.Equal(t, fault.Code(""), fault.CodeOf(fmt.Errorf("park: %w", fault.ErrSuspended)))
	assert.Equal(t, fault.Internal, fault.CodeOf(errors.New("plain")))
	assert.Equal(t, fault.Internal, fault.CodeOf(&fault.Error{Message: "no code"}))
}

func TestErrorfWrapsLikeFmt(t *testing.T) {
	cause := errors.New("connection reset")
	err := fault.Errorf(fault.Unavailable, "get cluster: %w", cause)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "get cluster: connection reset", err.Error())
	assert.Equal(t, "a: b", (&fault.Error{Message: "a", Err: errors.New("b")}).Error())
	assert.Equal(t, "b", (&fault.Error{Err: errors.New("b")}).Error())
	assert.Equal(t, "conflict", (&fault.Error{Code: fault.Conflict}).Error())
}

func TestCodeForHTTPStatus(t *testing.T) {
	for status, want := range map[int]fault.Code{
		429: fault.Throttled, 500: fault.Unavailable, 503: fault.Unavailable, 401: fault.Unauthorized,
		403: fault.Unauthorized, 404: fault.NotFound, 409: fault.Conflict, 408: fault.Timeout,
		400: fault.Invalid, 422: fault.Invalid, 200: fault.Failed, 302: fault.Failed,
	} {
		assert.Equal(t, want, fault.CodeForHTTPStatus(status), status)
	}
}

func TestProblemsJoinIntoOneInvalidError(t *testing.T) {
	assert.NoError(t, fault.ProblemsError("s", nil))
	err := fault.ProblemsError("resize", []fault.Problem{{Path: "node_count", Message: "must be at most 10"}, {Message: "no cluster"}})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	assert.Equal(t, "resize: invalid params: node_count: must be at most 10; no cluster", err.Error())
}
