package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestAuthContract(t *testing.T) {
	statetest.RunAuth(t, func(t *testing.T) state.AuthStore {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}
