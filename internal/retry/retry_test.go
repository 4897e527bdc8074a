package retry

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestBackoffStaysBetweenHalfAndTheDoublingBound(t *testing.T) {
	base, max := 200*time.Millisecond, 5*time.Second
	for attempt, bound := range map[int]time.Duration{1: base, 2: 2 * base, 3: 4 * base, 10: max, 200: max} {
		for i := 0; i < 50; i++ {
			d := Backoff(attempt, base, max)
			if d < bound/2 || d > bound {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", attempt, d, bound/2, bound)
			}
		}
	}
}

func TestAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{"seconds are read", "3", 3 * time.Second},
		{"an HTTP date is relative to now", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"a past date is no wait", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"garbage is no wait", "soon", 0},
		{"empty is no wait", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := After(tt.in, now); got != tt.want {
				t.Errorf("After(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
}
