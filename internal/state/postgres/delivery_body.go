package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// putDelivery stores a delivery's body under id (runbook_deliveries); a
// taken id is state.ErrExists (the transaction is then aborted, as a taken
// run ID aborts it).
func putDelivery(ctx context.Context, tx pgx.Tx, id string, body []byte, now time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO runbook_deliveries (id, body, created_at) VALUES ($1, $2, $3)`, id, orEmpty(body), now)
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
