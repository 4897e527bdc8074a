package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var ctx = context.Background()

// open opens a store on dsn, closed when t ends.
func open(t testing.TB, dsn string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	statetest.RunClocked(t, func(t *testing.T, now func() time.Time) state.Store {
		return open(t, pgtest.DB(t), postgres.Options{Now: now})
	})
}
