package postgres_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// The keys asked for at the same moment are taken by one statement; a
// key held already is reported with its holder, and a key asked for
// twice in the group goes to one of the two, the other told who holds it.
func TestKeysAskedForTogetherAreTakenInOneStatement(t *testing.T) {
	a, b := replicas(t)
	ok, _, err := b.AcquireLock(ctx, state.Lock{Key: "held", Owner: "elsewhere"})
	require.NoError(t, err)
	require.True(t, ok)

	type ask struct{ key, owner string }
	var asks []ask
	for i := range 8 {
		asks = append(asks, ask{fmt.Sprintf("k%d", i), fmt.Sprintf("run-%d", i)})
	}
	asks = append(asks, ask{"held", "run-h"}, ask{"twice", "run-t1"}, ask{"twice", "run-t2"})
	type answer struct {
		ok     bool
		holder *state.Lock
		err    error
	}
	answers := make([]answer, len(asks))
	postgres.HoldLocks(a, len(asks))
	var wg sync.WaitGroup
	for i, q := range asks {
		wg.Go(func() {
			ok, holder, err := a.AcquireLock(ctx, state.Lock{Key: q.key, Owner: q.owner})
			answers[i] = answer{ok, holder, err}
		})
	}
	wg.Wait()

	for i := range 8 {
		require.NoError(t, answers[i].err)
		assert.True(t, answers[i].ok, asks[i].key)
	}
	require.NoError(t, answers[8].err)
	assert.False(t, answers[8].ok)
	require.NotNil(t, answers[8].holder)
	assert.Equal(t, "elsewhere", answers[8].holder.Owner)
	t1, t2 := answers[9], answers[10]
	require.NoError(t, t1.err)
	require.NoError(t, t2.err)
	assert.True(t, t1.ok != t2.ok, "one of the two takes the key")
	loser := t1
	winner := "run-t2"
	if t1.ok {
		loser, winner = t2, "run-t1"
	}
	require.NotNil(t, loser.holder)
	assert.Equal(t, winner, loser.holder.Owner)

	groups, keys := a.LockGroups()
	assert.Equal(t, int64(1), groups, "the free keys went in one statement")
	assert.Equal(t, int64(10), keys, "each key once: the second ask of twice waits for the next group")
	locks, err := b.Locks(ctx)
	require.NoError(t, err)
	assert.Len(t, locks, 10)
}

// Two replicas taking the same keys at the same moment, asked in opposite
// orders, each take some and find the others held: every key is taken
// once, and no statement is aborted as a deadlock (each group inserts its
// keys in order).
func TestTwoReplicasTakingTheSameKeysDoNotDeadlock(t *testing.T) {
	a, b := replicas(t)
	const n = 40
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
	}
	reversed := slices.Clone(keys)
	slices.Reverse(reversed)
	var mu sync.Mutex
	owners := map[string][]string{}
	var wg sync.WaitGroup
	for _, side := range []struct {
		s     *postgres.Store
		name  string
		order []string
	}{{a, "A", keys}, {b, "B", reversed}} {
		postgres.HoldLocks(side.s, n)
		for _, k := range side.order {
			wg.Go(func() {
				ok, holder, err := side.s.AcquireLock(ctx, state.Lock{Key: k, Owner: side.name + "-" + k})
				assert.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					owners[k] = append(owners[k], side.name)
				} else if assert.NotNil(t, holder, k) {
					assert.NotEqual(t, side.name+"-"+k, holder.Owner)
				}
			})
		}
	}
	wg.Wait()
	for _, k := range keys {
		assert.Len(t, owners[k], 1, k)
	}
	assert.Zero(t, postgres.Retries(a)+postgres.Retries(b), "no group was aborted and run again")
}
