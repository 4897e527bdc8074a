package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Free keys taken in groups.
//
// A keyed run takes its concurrency key before it starts (AcquireLock).
// The key is usually free, and the keys asked for at the same moment
// (the runs of a burst of webhook deliveries, each keyed by its number)
// are taken by one statement: an INSERT of every key that a key already
// held skips (ON CONFLICT DO NOTHING), returning the keys it took. A key
// it did not take is looked at by AcquireLock's own transaction as
// before (held by whom, or held by a run that ended). A group holds each
// key once and inserts its keys in order, so two groups (two replicas)
// taking the same keys wait for each other in one order, never in a
// cycle.

// lockReq is a free key's insert waiting for a group.
type lockReq struct {
	key, owner, process string
	since               time.Time
	record              []byte
	took                bool
	err                 error
}

// newLockQueue returns s's group queue for free keys: one group in
// flight, each key once in a group; a caller whose insert was taken waits
// for its outcome (a key taken is never left unknown to its taker).
func newLockQueue(s *Store) *groupQueue[*lockReq] {
	return &groupQueue[*lockReq]{workers: 1, max: maxWriteGroup, fits: eachKeyOnce, send: s.lockGroup, waitTaken: true}
}

// eachKeyOnce returns a new lock group's rule: each key once.
func eachKeyOnce() func(*lockReq) bool {
	keys := map[string]bool{}
	return func(l *lockReq) bool {
		if keys[l.key] {
			return false
		}
		keys[l.key] = true
		return true
	}
}

// insertLocks inserts the keys $1 (in that order) that are free and
// returns those it took.
const insertLocks = `INSERT INTO runbook_locks (key, owner, process, since, record)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::json[])
ON CONFLICT (key) DO NOTHING RETURNING key`

// lockGroup inserts the free keys of group in one statement, in key
// order, and sets whether each was taken.
func (s *Store) lockGroup(ctx context.Context, group []*lockReq) bool {
	sorted := slices.SortedFunc(slices.Values(group), func(a, b *lockReq) int { return strings.Compare(a.key, b.key) })
	n := len(sorted)
	keys, owners, processes := make([]string, n), make([]string, n), make([]string, n)
	since, records := make([]time.Time, n), make([][]byte, n)
	for i, l := range sorted {
		keys[i], owners[i], processes[i], since[i], records[i] = l.key, l.owner, l.process, l.since, l.record
	}
	var took map[string]bool
	err := s.retry(ctx, func() error {
		took = map[string]bool{}
		rows, err := s.pool.Query(ctx, insertLocks, keys, owners, processes, since, records)
		if err != nil {
			return err
		}
		var key string
		_, err = pgx.ForEachRow(rows, []any{&key}, func() error {
			took[key] = true
			return nil
		})
		return err
	})
	for _, l := range group {
		if err != nil {
			l.err = fmt.Errorf("acquire lock %s: %w", l.key, err)
			continue
		}
		l.took = took[l.key]
	}
	return n > 1
}

// LockGroups returns how many statements took free keys for several
// runs at once and how many keys they held.
func (s *Store) LockGroups() (groups, keys int64) {
	return s.locks.Groups()
}

// committedKeys are the concurrency keys delivery commits took for their
// runs (groupInsert), kept until each run asks for its key: its
// AcquireLock of the key is then answered yes with no round trip
// (take). The run was committed already claimed by this replica, which
// executes it within milliseconds, and nothing frees its key before the
// run's own end: a cancel of it recorded by another process leaves the
// key to the run's owner (state.RunStatus.KeyFreed). What a commit took
// is trusted for maxKeptAge all the same, as what a claim read is
// (claimGrouper). A run that asks later, or a key kept
// beyond maxKeptClaims runs, is answered by the database: the key held
// in the run's name is its own (AcquireLock).
type committedKeys struct {
	mu   sync.Mutex
	kept map[string]committedKey // run ID -> the key its commit took
}

type committedKey struct {
	key string
	at  time.Time
}

// keep keeps key, which run id's commit took.
func (c *committedKeys) keep(id, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kept == nil || len(c.kept) >= maxKeptClaims {
		c.kept = map[string]committedKey{}
	}
	c.kept[id] = committedKey{key: key, at: time.Now()}
}

// take reports, once, whether run id's commit took key a moment ago.
func (c *committedKeys) take(id, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.kept[id]
	if !ok {
		return false
	}
	delete(c.kept, id)
	return k.key == key && time.Since(k.at) < maxKeptAge
}
