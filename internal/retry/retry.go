// Package retry is the timing of runbook's retries: exponential backoff
// with equal jitter, the Retry-After header, and a sleep that ends with its
// context. Two loops use it: the cloud clients' call loop,
// internal/cloud/httpcall (which calls may be retried is each client's
// policy there: never a mutating call whose outcome is unknown), and the
// engine's store retry (internal/engine/storefault.go: only what the store
// marks state.ErrUnavailable). How long to wait is decided here, once.
package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff returns the wait before retry number attempt (1-based): between
// half and all of base doubled attempt-1 times, capped at max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	bound := base
	for i := 1; i < attempt && bound < max; i++ {
		bound *= 2
	}
	if bound > max || bound <= 0 {
		bound = max
	}
	return bound/2 + rand.N(bound/2+1)
}

// After reads a Retry-After header value: delay seconds or an HTTP date
// (relative to now). A missing, malformed or past value is 0.
func After(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Sleep waits d or until ctx ends (returning ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
