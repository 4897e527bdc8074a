//go:build soak

package notify_test

import (
	"testing"
	"time"
)

// A receiver down for a minute: the message arrives after it returns.
func TestAMessageToAReceiverDownForAMinuteArrivesWhenItReturns(t *testing.T) {
	testReceiverDown(t, time.Minute)
}
