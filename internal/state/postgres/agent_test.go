package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestAgentContract(t *testing.T) {
	statetest.RunAgents(t, func(t *testing.T) state.Store {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}
