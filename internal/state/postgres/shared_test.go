package postgres_test

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

// Two stores over one database, as two replicas have them.
func TestSharedContract(t *testing.T) {
	statetest.RunShared(t, func(t *testing.T) (state.Store, state.Store) {
		dsn := pgtest.DB(t)
		return open(t, dsn, postgres.Options{}), open(t, dsn, postgres.Options{})
	})
}
