package server

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// BenchmarkHistoryRead is the read behind the playbooks page's run
// history (GET /api/v1/history), on each store: the last 20 runs of each
// of 10 playbooks out of 20,000, one listing per playbook (as the page
// read its last run before) against one RecentRuns.
//
//	go test ./internal/server -run XXX -bench HistoryRead -benchtime 20x
func BenchmarkHistoryRead(b *testing.B) {
	b.Run("bbolt", func(b *testing.B) {
		store, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{NoSync: true})
		require.NoError(b, err)
		defer store.Close()
		benchHistory(b, store)
	})
	b.Run("postgres", func(b *testing.B) {
		store, err := postgres.Open(context.Background(), pgtest.DB(b), postgres.Options{})
		require.NoError(b, err)
		defer store.Close()
		benchHistory(b, store)
	})
}

func benchHistory(b *testing.B, store state.Store) {
	ctx := context.Background()
	var names []string
	for i := range 10 {
		names = append(names, "pb-"+strconv.Itoa(i))
	}
	t0 := time.Now().Add(-time.Hour)
	for i := range 20000 {
		r := &state.Run{ID: "r" + strconv.Itoa(i), Playbook: names[i%10], Status: state.RunSucceeded, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
		r.EndedAt = r.CreatedAt
		require.NoError(b, store.CreateRun(ctx, r))
	}
	b.Run("one listing per playbook", func(b *testing.B) {
		for range b.N {
			for _, name := range names {
				runs, err := store.ListRuns(ctx, state.RunFilter{Playbook: name, Limit: 20})
				require.NoError(b, err)
				require.Len(b, runs, 20)
			}
		}
	})
	b.Run("RecentRuns", func(b *testing.B) {
		for range b.N {
			recent, err := store.RecentRuns(ctx, names, 20)
			require.NoError(b, err)
			require.Len(b, recent, 10)
		}
	})
}
