package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A replica whose process was stopped (SIGSTOP) or suspended past the
// moment the database ends its lease lapses and stops its runs before its
// first renewal after it is taken into account, whichever of its lease
// timer and that renewal comes first when it wakes: the runs stopped are
// claimed again at the renewal (onBack with stopped), so a run another
// replica took meanwhile is not executed further here.
func TestARenewalAfterAPausePastTheLeaseIsALapseFirst(t *testing.T) {
	var calls []string
	l := &lapse{}
	l.renewed(time.Now().Add(-10 * time.Second)) // the last renewal before the pause
	l.valid, l.grace, l.expiry = 3*time.Second, time.Second, 5*time.Second
	l.onLapse = func(time.Duration) { calls = append(calls, "lapse") }
	l.onStop = func(time.Duration) { calls = append(calls, "stop") }
	l.onBack = func(stopped bool) {
		calls = append(calls, map[bool]string{true: "back stopped", false: "back held"}[stopped])
	}
	l.timer = time.AfterFunc(time.Hour, func() {}) // the timer has not fired yet: the process just woke

	l.renewed(time.Now())
	assert.Equal(t, []string{"lapse", "stop", "back stopped"}, calls)
	assert.True(t, l.everLapsed())
	assert.True(t, l.holds(), "renewed")
}

// The engine measures the lease itself before each step attempt: the
// lapse sets in it when the lease lapses (hold: engine.SetLease), valid
// after the send of the last renewal that succeeded, from the start of its
// watch and at each renewal. A renewal past the database's expiry (a
// process stopped that long) stops the runs before it sets the later
// moment, so no step starts between.
func TestTheLapseSetsWhenTheLeaseLapsesAndStopsTheRunsFirst(t *testing.T) {
	var (
		calls []string
		holds []time.Time
	)
	l := &lapse{}
	l.hold = func(until time.Time) {
		calls = append(calls, "hold")
		holds = append(holds, until)
	}
	joined := time.Now()
	l.renewed(joined)
	assert.Empty(t, holds, "not before the watch starts")
	stop := l.watch(time.Hour, time.Minute, 2*time.Hour,
		func(time.Duration) { calls = append(calls, "lapse") },
		func(time.Duration) { calls = append(calls, "stop") },
		func(bool) { calls = append(calls, "back") })
	defer stop()
	assert.Equal(t, []time.Time{joined.Add(time.Hour)}, holds, "set at the watch's start")

	// The process was stopped 10 s, past a lease of 3 s and its expiry
	// (5 s); its timer has not fired yet.
	l.mu.Lock()
	l.sent, l.valid, l.grace, l.expiry = time.Now().Add(-10*time.Second), 3*time.Second, time.Second, 5*time.Second
	calls = nil
	l.mu.Unlock()
	now := time.Now()
	l.renewed(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, []string{"lapse", "stop", "hold", "back"}, calls)
	assert.Equal(t, now.Add(3*time.Second), holds[len(holds)-1])
}

// A replica commits the runs it prepares as its own (Host.Prepare) only
// while its lease is live: once it joined (a renewal succeeded), and
// until it lapses, as measured at that moment (a process paused past its
// lease, whose timer has not fired yet, is not live).
func TestALeaseIsLiveFromItsFirstRenewalUntilItLapses(t *testing.T) {
	l := &lapse{}
	assert.False(t, l.live(), "not joined")
	stop := l.watch(3*time.Second, time.Second, 5*time.Second, func(time.Duration) {}, func(time.Duration) {}, func(bool) {})
	defer stop()
	l.renewed(time.Now())
	assert.True(t, l.live(), "renewed a moment ago")

	l.mu.Lock()
	l.sent = time.Now().Add(-4 * time.Second) // paused past the lease; the timer has not fired
	l.mu.Unlock()
	assert.False(t, l.live(), "lapsed, measured now")
	l.renewed(time.Now())
	assert.True(t, l.live(), "renewed again")
}
