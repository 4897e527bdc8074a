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
