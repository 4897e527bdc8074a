package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

// pruneBatch bounds how many expired dedup keys one call deletes, so a
// call's cost stays small however many keys expired meanwhile.
const pruneBatch = 64

// Pruning is paced. An expired key is garbage: a claim checks the expiry
// itself, so deleting the key only keeps the table small. A write that
// records keys (a delivery's group or transaction, a Dedup) deletes up to
// pruneBatch expired ones in its transaction. Once a prune finds fewer
// than that (none left for now), the store's writes skip the prune for
// pruneEvery: keys expire at the pace they were recorded, a TTL earlier,
// so a second's worth goes in a few writes. Pruning in every write cost
// each group of deliveries a statement more, most of them deleting
// nothing (see "Expired keys pruned at a pace" in docs/performance.md).
const pruneEvery = time.Second

// prunePace says when a store's writes prune next.
type prunePace struct {
	every time.Duration // pruneEvery; tests set it
	next  atomic.Int64  // time.Now().UnixNano() before which writes skip the prune
}

// due reports whether a write should prune.
func (p *prunePace) due() bool { return time.Now().UnixNano() >= p.next.Load() }

// pruned records that a prune deleted n keys: fewer than pruneBatch and
// the next waits for p.every, a full batch and the next write prunes
// again.
func (p *prunePace) pruned(n int64) {
	if n >= pruneBatch {
		p.next.Store(0)
		return
	}
	p.next.Store(time.Now().Add(p.every).UnixNano())
}

// queuePrune queues pruneDedup of keys expired at now in b when a prune
// is due. It must come last in its transaction (see prune).
func (s *Store) queuePrune(b *pgx.Batch, now time.Time) {
	if !s.prunes.due() {
		return
	}
	b.Queue(pruneDedup, now, pruneBatch).Exec(func(ct pgconn.CommandTag) error {
		s.prunes.pruned(ct.RowsAffected())
		return nil
	})
}

// claimKey records key $1 at $2 with expiry $3 (NULL: never) and value $4
// (NULL: none) unless it is seen: live (not expired at $2) and first
// recorded after $5 (NULL: ever). It returns a row when it recorded the
// key. The primary key makes the claim exactly-once: a transaction
// claiming a key another has just claimed waits for it to end, then finds
// the key seen (or, if it rolled back, claims it).
const claimKey = `INSERT INTO runbook_dedup AS d (key, first_seen, expires_at, value) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET first_seen = EXCLUDED.first_seen, expires_at = EXCLUDED.expires_at, value = EXCLUDED.value
WHERE NOT ((d.expires_at IS NULL OR d.expires_at > $2) AND ($5::timestamptz IS NULL OR d.first_seen > $5))
RETURNING true`

// pruneDedup deletes up to $2 keys expired at $1, skipping those another
// transaction holds (a replica pruning or claiming them).
const pruneDedup = `DELETE FROM runbook_dedup WHERE key IN (
	SELECT key FROM runbook_dedup WHERE expires_at <= $1
	ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
)`

// prune deletes a few keys expired at now, when a prune is due (see
// prunePace). It comes last in its transaction: it waits for no lock
// (SKIP LOCKED), and a transaction that waits for a key it deleted then
// waits for a transaction that waits for nothing more, never for one
// waiting on it in turn.
func (s *Store) prune(ctx context.Context, tx pgx.Tx, now time.Time) error {
	if !s.prunes.due() {
		return nil
	}
	ct, err := tx.Exec(ctx, pruneDedup, now, pruneBatch)
	if err != nil {
		return fmt.Errorf("prune expired keys: %w", err)
	}
	s.prunes.pruned(ct.RowsAffected())
	return nil
}

// live is the condition for a key that has not expired at $2.
const live = `(expires_at IS NULL OR expires_at > $2)`

// claim records key at now unless it is seen (see claimKey), and
// reports whether it was. val is attached when the key is recorded.
func claim(ctx context.Context, tx pgx.Tx, key string, now time.Time, ttl time.Duration, val []byte) (seen bool, err error) {
	expires, since := claimTimes(now, ttl)
	var recorded bool
	err = tx.QueryRow(ctx, claimKey, key, now, expires, val, since).Scan(&recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", key, err)
	}
	return false, nil
}

// claimTimes returns claimKey's expiry and the time after which a
// recorded key is seen, for a key claimed at now with ttl: none (NULL)
// when ttl is 0, kept for good.
func claimTimes(now time.Time, ttl time.Duration) (expires, since *time.Time) {
	if ttl <= 0 {
		return nil, nil
	}
	exp, from := now.Add(ttl), now.Add(-ttl)
	return &exp, &from
}

// dedupValue returns the value attached to a key (nil: none).
func dedupValue(ctx context.Context, tx pgx.Tx, key string) ([]byte, error) {
	var val []byte
	err := tx.QueryRow(ctx, `SELECT value FROM runbook_dedup WHERE key = $1`, key).Scan(&val)
	if err != nil {
		return nil, fmt.Errorf("read claim %s: %w", key, err)
	}
	return val, nil
}

// Dedup records key and reports whether it was already recorded less than
// ttl ago (ttl 0: ever) and has not expired. The first-seen time of a key
// that is seen again is kept, so a key is forgotten ttl after it was
// first recorded. Expired keys are deleted a few at a time by later calls.
// Times are the store's clock (Options.Now), kept to the microsecond.
func (s *Store) Dedup(ctx context.Context, key string, ttl time.Duration) (seen bool, err error) {
	now := s.now()
	b := &pgx.Batch{}
	expires, since := claimTimes(now, ttl)
	b.Queue(claimKey, key, now, expires, nil, since).QueryRow(func(row pgx.Row) error {
		var recorded bool
		err := row.Scan(&recorded)
		seen = errors.Is(err, pgx.ErrNoRows)
		if seen {
			return nil
		}
		return err
	})
	s.queuePrune(b, now) // last: see prune
	if err := s.send(ctx, b); err != nil {
		return false, fmt.Errorf("dedup %s: %w", key, err)
	}
	return seen, nil
}

// DedupGet returns the value DedupSet attached to key while key is live, or
// state.ErrNotFound when key is absent, expired or has no value.
func (s *Store) DedupGet(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dedup get %s: %w", key, err)
	}
	var val []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM runbook_dedup WHERE key = $1 AND value IS NOT NULL AND `+live, key, s.now()).Scan(&val)
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("dedup get %s: %w", key, err)
	}
	return orEmpty(val), nil
}

// DedupSet attaches val to key, replacing any value, while key is live; it
// fails with state.ErrNotFound when key is absent or expired. The value is
// kept in the key's row, so it goes with the key.
func (s *Store) DedupSet(ctx context.Context, key string, val []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dedup set %s: %w", key, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE runbook_dedup SET value = $3 WHERE key = $1 AND `+live, key, s.now(), orEmpty(val))
	if err == nil && tag.RowsAffected() == 0 {
		err = state.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("dedup set %s: %w", key, err)
	}
	return nil
}
