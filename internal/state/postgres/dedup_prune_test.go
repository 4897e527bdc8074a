package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// Expired dedup keys are deleted by later writes, a batch at a time: a
// write after a full batch prunes again, and once a prune leaves none
// the writes skip it until the pause has passed.
func TestExpiredKeysArePrunedABatchAtATimeThenPaused(t *testing.T) {
	dsn := pgtest.DB(t)
	now := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := open(t, dsn, postgres.Options{Now: clock})
	postgres.PruneEvery(s, time.Hour) // only PruneNext ends a pause here
	db := connect(t, dsn)
	keys := func() (all, expired int) {
		t.Helper()
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= $1) FROM runbook_dedup`, clock()).
			Scan(&all, &expired))
		return all, expired
	}

	// The first write prunes (nothing has expired), and pauses.
	const old = postgres.PruneBatch + 36
	for i := range old {
		_, err := s.Dedup(ctx, fmt.Sprintf("old/%d", i), time.Minute)
		require.NoError(t, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // the old keys have expired
	mu.Unlock()
	_, err := s.CommitDelivery(ctx, groupDelivery("d1", "hook/d1", "r1"))
	require.NoError(t, err)
	all, expired := keys()
	assert.Equal(t, old, expired, "pausing, the delivery's group pruned nothing")
	assert.Equal(t, old+2, all, "the delivery's key and its hook's are recorded")

	postgres.PruneNext(s)
	_, err = s.CommitDelivery(ctx, groupDelivery("d2", "hook/d2", "r2"))
	require.NoError(t, err)
	_, expired = keys()
	assert.Equal(t, old-postgres.PruneBatch, expired, "a due prune deletes one batch")

	_, err = s.Dedup(ctx, "after-a-full-batch", time.Minute)
	require.NoError(t, err)
	_, expired = keys()
	assert.Equal(t, 0, expired, "a full batch is followed by another prune")

	mu.Lock()
	now = now.Add(2 * time.Hour) // d1's, d2's and the Dedup's keys have expired
	mu.Unlock()
	_, err = s.CommitDelivery(ctx, groupDelivery("d3", "hook/d3", "r3"))
	require.NoError(t, err)
	all, expired = keys()
	assert.Equal(t, 5, expired, "a prune that left none pauses the next ones")
	assert.Equal(t, 7, all)
}
