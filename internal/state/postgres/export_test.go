package postgres

import (
	"context"
	"testing"
	"time"
)

// Retries returns how many transactions the store ran again after
// PostgreSQL aborted them (a deadlock, a serialization failure).
func Retries(s *Store) int64 { return s.retries.Load() }

// ListQuery is the SQL and arguments of ListRuns.
var ListQuery = listQuery

// ClaimRuns is the SQL of ClaimRun's claims (see claimRuns).
var ClaimRuns = claimRuns

// MigrationLock is the first half of the migration's advisory lock.
const MigrationLock = migrationLock

// MaxConns is the size of the store's pool.
func MaxConns(s *Store) int32 { return s.pool.Config().MaxConns }

// HoldPool takes every connection of the store's pool until t ends, as
// the writes of a replica recovering its runs do.
func HoldPool(t testing.TB, s *Store) {
	t.Helper()
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
	}
}

// HoldRunWrites makes s's next group of fenced run writes wait until n
// writes are queued.
func HoldRunWrites(s *Store, n int) {
	s.writes.holdNext(n)
}

// HoldClaims makes s's next group of claims wait until n claims are
// queued.
func HoldClaims(s *Store, n int) {
	s.claims.holdNext(n)
}

// WaitingRunWrites returns how many fenced run writes wait for a group.
func WaitingRunWrites(s *Store) int { return s.writes.waiting() }

// HoldLocks makes s's next group of free-key inserts wait until n are
// queued.
func HoldLocks(s *Store, n int) {
	s.locks.holdNext(n)
}

// SweepPlan and SweepRuns are ClaimRuns's setting and selection.
const (
	SweepPlan = sweepPlan
	SweepRuns = sweepRuns
)

// PruneEvery sets how long s's writes skip pruning expired dedup keys
// after a prune that found fewer than a batch (see prunePace). Set it
// before s is used.
func PruneEvery(s *Store, d time.Duration) { s.prunes.every = d }

// PruneNext makes s's next write prune, as if the pause had passed.
func PruneNext(s *Store) { s.prunes.next.Store(0) }

// PruneBatch is how many expired keys one prune deletes at most.
const PruneBatch = pruneBatch
