package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// A sweep of the queue reads what ended since the last sweep, not every
// run that ended since the last vacuum: runs that ended leave entries in
// the partial indexes of unfinished runs until a vacuum, and a bitmap
// scan of them read the table page of each at every sweep. With
// ClaimRuns's setting, the first sweep marks them dead in the index and
// the next one skips them. (On a table this small the planner picks the
// index scan unbidden; under load, with statistics a vacuum old, it took
// the bitmap scan: see sweepPlan.)
func TestASweepSkipsTheEntriesOfEndedRuns(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `ALTER TABLE runbook_runs SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	const ended = 3000
	for i := range ended {
		require.NoError(t, s.CreateRun(ctx, &state.Run{ID: fmt.Sprint("r", i), Playbook: "pb", Status: state.RunPending, Owner: "replica-b"}))
	}
	_, err = conn.Exec(ctx, `UPDATE runbook_runs SET status = 'succeeded'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `ANALYZE runbook_runs`)
	require.NoError(t, err)
	var pages int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_relation_size('runbook_runs') / current_setting('block_size')::int`).Scan(&pages))
	require.Greater(t, pages, 100, "the ended runs' table pages")

	// blocks is the buffers a sweep touched, from its plan's root.
	blocks := func(tx pgx.Tx) int {
		var out []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		var plan []byte
		require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+postgres.SweepRuns,
			"replica-a", 100, int64(0), false).Scan(&plan))
		require.NoError(t, json.Unmarshal(plan, &out))
		return out[0].Plan.Hit + out[0].Plan.Read
	}
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, postgres.SweepPlan)
	require.NoError(t, err)
	first := blocks(tx)
	second := blocks(tx)
	t.Logf("%d ended runs on %d pages: the first sweep touched %d buffers, the second %d", ended, pages, first, second)
	assert.Less(t, second, 50, "buffers the second sweep touched")

	ids, err := s.ClaimRuns(ctx, "replica-a", 10, 0, false)
	require.NoError(t, err)
	assert.Empty(t, ids, "no run is unfinished")
}
