package engine

import (
	"context"
	"time"
)

// Clock is the time source for retry delays and timestamps. Tests inject a
// fake that advances instantly.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends (returning ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

// Sleep waits d on the real clock or until ctx ends (returning ctx.Err()):
// the Sleep of a Clock whose time is the process's, or a scaled one's
// once it has turned d into real time.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
