package postgres_test

import (
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestNotificationContract(t *testing.T) {
	statetest.RunNotifications(t, func(t *testing.T, now func() time.Time) state.NotificationStore {
		return open(t, pgtest.DB(t), postgres.Options{Now: now})
	})
}
