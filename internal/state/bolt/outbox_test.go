package bolt_test

import (
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestNotificationContract(t *testing.T) {
	statetest.RunNotifications(t, func(t *testing.T, now func() time.Time) state.NotificationStore {
		s, _ := openTemp(t, bolt.Options{Now: now})
		return s
	})
}
