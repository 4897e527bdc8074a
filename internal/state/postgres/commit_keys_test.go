package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// keyedDelivery is groupDelivery whose run is committed claimed by
// owner (none when empty) with concurrency key key, created at
// created.
func keyedDelivery(n int, owner, key string, created time.Time) state.Delivery {
	id := fmt.Sprintf("r%d", n)
	d := groupDelivery(fmt.Sprintf("d%d", n), fmt.Sprintf("hook/%d", n), id)
	run := d.Units[0].Run
	run.Owner, run.ConcurrencyKey, run.CreatedAt = owner, key, created
	return d
}

// lockRow returns the owner of key's lock and the transaction that wrote
// it ("" and "" when the key is free).
func lockRow(t *testing.T, dsn, key string) (owner, xmin string) {
	t.Helper()
	rows, err := connect(t, dsn).Query(ctx, `SELECT owner, xmin::text FROM runbook_locks WHERE key = $1`, key)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		require.NoError(t, rows.Scan(&owner, &xmin))
	}
	require.NoError(t, rows.Err())
	return owner, xmin
}

// runXmin returns the transaction that wrote run id's row.
func runXmin(t *testing.T, dsn, id string) string {
	t.Helper()
	var xmin string
	require.NoError(t, connect(t, dsn).QueryRow(ctx, `SELECT xmin::text FROM runbook_runs WHERE id = $1`, id).Scan(&xmin))
	return xmin
}

// A delivery group takes, in the transaction that commits them, the free
// concurrency keys of the runs it commits already claimed: of two runs
// with one key the first created takes it, a key held already stays its
// holder's, and a run committed without an owner takes nothing. A run's
// AcquireLock of the key its commit took is then answered yes from what
// the commit returned, once, without asking the database; a later one
// asks it (and finds the key the run's own).
func TestADeliveryGroupTakesTheFreeKeysOfTheRunsItCommitsClaimed(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	ok, _, err := s.AcquireLock(ctx, state.Lock{Key: "k/held", Owner: "elsewhere"})
	require.NoError(t, err)
	require.True(t, ok)

	const replica = "serve-host/1@1"
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, errs := commitTogether(t, s, dsn,
		keyedDelivery(0, replica, "k/b", t0.Add(time.Second)),
		keyedDelivery(1, replica, "k/a", t0.Add(2*time.Second)),
		keyedDelivery(2, replica, "k/a", t0), // created first: it takes k/a
		keyedDelivery(3, replica, "k/held", t0),
		keyedDelivery(4, "", "k/c", t0), // not claimed: its claim takes the key
	)
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, transactions(t, dsn, "r0", "r1", "r2", "r3", "r4"), "one group")

	for key, want := range map[string]string{"k/a": "r2", "k/b": "r0", "k/held": "elsewhere", "k/c": ""} {
		owner, xmin := lockRow(t, dsn, key)
		assert.Equal(t, want, owner, "the holder of %s", key)
		if want == "r2" || want == "r0" {
			assert.Equal(t, runXmin(t, dsn, want), xmin, "%s taken in the transaction that committed %s", key, want)
		}
	}
	locks, err := s.Locks(ctx)
	require.NoError(t, err)
	require.Len(t, locks, 3)
	assert.Equal(t, state.Lock{Key: "k/a", Owner: "r2", Process: replica, Since: locks[0].Since}, locks[0], "recorded as AcquireLock records it")
	assert.False(t, locks[0].Since.IsZero())

	// r2 asks for its key: answered from the commit, without the
	// database (the row deleted behind the store's back stays deleted).
	_, err = connect(t, dsn).Exec(ctx, `DELETE FROM runbook_locks WHERE key = 'k/a'`)
	require.NoError(t, err)
	ok, holder, err := s.AcquireLock(ctx, state.Lock{Key: "k/a", Owner: "r2", Process: replica})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Nil(t, holder)
	owner, _ := lockRow(t, dsn, "k/a")
	assert.Empty(t, owner, "answered without a statement")
	// Once only: asked again, the database answers (and the free key is
	// taken for it).
	ok, _, err = s.AcquireLock(ctx, state.Lock{Key: "k/a", Owner: "r2", Process: replica})
	require.NoError(t, err)
	assert.True(t, ok)
	owner, _ = lockRow(t, dsn, "k/a")
	assert.Equal(t, "r2", owner)

	// r0 holds k/b: the database answers a run asking for another key
	// than its commit took.
	ok, holder, err = s.AcquireLock(ctx, state.Lock{Key: "k/x", Owner: "r0", Process: replica})
	require.NoError(t, err)
	assert.True(t, ok)
	owner, _ = lockRow(t, dsn, "k/x")
	assert.Equal(t, "r0", owner)

	// The runs that took nothing are told who holds their key.
	for id, key := range map[string]string{"r1": "k/a", "r3": "k/held"} {
		ok, holder, err = s.AcquireLock(ctx, state.Lock{Key: key, Owner: id, Process: replica})
		require.NoError(t, err)
		assert.False(t, ok, "%s asks for %s", id, key)
		require.NotNil(t, holder)
		assert.NotEqual(t, id, holder.Owner)
	}
}

// A key a commit took for a run is not trusted beyond a moment: the run
// that asks later is answered by the database.
func TestAKeyTakenWithACommitIsNotTrustedBeyondAMoment(t *testing.T) {
	dsn := pgtest.DB(t)
	s := open(t, dsn, postgres.Options{})
	_, err := s.CommitDelivery(ctx, keyedDelivery(0, "serve-host/1@1", "k", time.Now()))
	require.NoError(t, err)
	owner, _ := lockRow(t, dsn, "k")
	require.Equal(t, "r0", owner)
	_, err = connect(t, dsn).Exec(ctx, `UPDATE runbook_locks SET owner = 'another', record = '{"key":"k","owner":"another","since":"2030-01-01T00:00:00Z"}' WHERE key = 'k'`)
	require.NoError(t, err)

	time.Sleep(postgres.MaxKeptAge)
	ok, holder, err := s.AcquireLock(ctx, state.Lock{Key: "k", Owner: "r0"})
	require.NoError(t, err)
	assert.False(t, ok, "the database was asked")
	require.NotNil(t, holder)
	assert.Equal(t, "another", holder.Owner)
}
