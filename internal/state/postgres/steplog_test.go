package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestStepOutputContract(t *testing.T) {
	statetest.RunStepOutput(t, func(t *testing.T) statetest.OutputStore {
		return open(t, pgtest.DB(t), postgres.Options{})
	})
}
