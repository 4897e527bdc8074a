package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// TestMain lets tests and benchmarks of this package use a throwaway
// PostgreSQL (pgtest.DB); the server starts at the first such call only.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openPG opens a store on the database dsn, closed when the test ends.
func openPG(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// benchStores are the stores a benchmark compares: a fsynced bbolt file
// and a PostgreSQL database (fsync and synchronous_commit on, loopback
// TCP, the store's default pool).
var benchStores = []struct {
	name string
	open func(b *testing.B) state.Store
}{
	{"bolt", func(b *testing.B) state.Store {
		s, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) state.Store {
		s, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}
