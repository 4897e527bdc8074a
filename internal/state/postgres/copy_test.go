package postgres_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestExportContract(t *testing.T) {
	pg := func(t *testing.T, now func() time.Time) statetest.ExportStore {
		return open(t, pgtest.DB(t), postgres.Options{Now: now})
	}
	file := func(t *testing.T, now func() time.Time) statetest.ExportStore {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Now: now, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("postgres to postgres", func(t *testing.T) { statetest.RunExport(t, pg, pg) })
	t.Run("bolt to postgres", func(t *testing.T) { statetest.RunExport(t, file, pg) })
	t.Run("postgres to bolt", func(t *testing.T) { statetest.RunExport(t, pg, file) })
}
