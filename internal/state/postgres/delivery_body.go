package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// insertDelivery stores body $2 under id $1 at $3.
const insertDelivery = `INSERT INTO runbook_deliveries (id, body, created_at) VALUES ($1, $2, $3)`

// putDelivery stores a delivery's body under id (runbook_deliveries); a
// taken id is state.ErrExists (the transaction is then aborted, as a taken
// run ID aborts it).
func putDelivery(ctx context.Context, tx pgx.Tx, id string, body []byte, now time.Time) error {
	_, err := tx.Exec(ctx, insertDelivery, id, orEmpty(body), now)
	if isUniqueViolation(err, "runbook_deliveries_pkey") {
		return fmt.Errorf("delivery %s: %w", id, state.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store delivery %s: %w", id, err)
	}
	return nil
}

// GetDelivery returns the body stored under id, or state.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	if body, ok := s.bodies.get(id); ok {
		return body, nil
	}
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM runbook_deliveries WHERE id = $1`, id).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	return orEmpty(body), nil
}

// Bodies of the deliveries this store committed are kept for a while:
// each run a delivery started reads its body when it starts executing
// (the engine resolves its trigger), usually in this process a moment
// after the commit. A body is never changed once stored, so a kept one is
// the stored one; a body is deleted only once no run refers to it
// (DeleteUnusedDeliveries, which forgets the kept ones).
const (
	maxKeptBody   = 64 << 10 // larger bodies are read from the database
	maxKeptBodies = 4 << 20  // bytes kept in all
	maxBodyAge    = time.Minute
)

// bodyCache keeps the bodies of deliveries committed recently.
type bodyCache struct {
	mu     sync.Mutex
	bodies map[string]keptBody
	size   int
}

type keptBody struct {
	body []byte
	at   time.Time
}

// keep keeps body, stored under id when stored is true.
func (c *bodyCache) keep(id string, body []byte, stored bool) {
	if !stored || id == "" || len(body) > maxKeptBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodies == nil || c.size+len(body) > maxKeptBodies {
		c.bodies, c.size = map[string]keptBody{}, 0
	}
	c.bodies[id] = keptBody{body: bytes.Clone(orEmpty(body)), at: time.Now()}
	c.size += len(body)
}

// get returns a copy of the body kept under id, if it is kept and recent.
func (c *bodyCache) get(id string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.bodies[id]
	if !ok || time.Since(k.at) > maxBodyAge {
		return nil, false
	}
	return bytes.Clone(k.body), true
}

// forget drops every kept body.
func (c *bodyCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies, c.size = nil, 0
}

// deliveriesLock is the advisory lock that orders the deletion of unused
// delivery bodies (held exclusively) against the creation of a run that
// refers to a stored body (held shared): without it, a run committed
// after the deletion read the runs would refer to a body it deletes. A
// delivery's own runs need no lock: they commit with their body.
const deliveriesLock = 0x72756e6264656c // "runbdel"

// DeleteUnusedDeliveries deletes the bodies no run refers to.
func (s *Store) DeleteUnusedDeliveries(ctx context.Context) (int, error) {
	defer s.bodies.forget()
	var n int64
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(deliveriesLock)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM runbook_deliveries d
WHERE NOT EXISTS (SELECT FROM runbook_runs r WHERE r.record->'delivery'->>'id' = d.id)`)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete unused deliveries: %w", err)
	}
	return int(n), nil
}

// createRunOfDelivery creates a run that refers to a stored delivery body
// (a retry of a delivery's run), failing with state.ErrNotFound when the
// body was deleted.
func (s *Store) createRunOfDelivery(ctx context.Context, r *state.Run, b *pgx.Batch) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, int64(deliveriesLock)); err != nil {
			return err
		}
		var found bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM runbook_deliveries WHERE id = $1)`, r.Delivery.ID).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("its delivery %s: %w", r.Delivery.ID, state.ErrNotFound)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}
