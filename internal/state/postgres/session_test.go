package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestSessionContract(t *testing.T) {
	statetest.RunSessions(t, func(t *testing.T) state.SessionStore {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}
