package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// CommitDelivery commits a webhook delivery in one transaction (see
// state.Delivery). The delivery's key is claimed first: a replica
// committing the same delivery at the same moment waits on that row and
// then finds the key live, a duplicate, whichever replica took the
// webhook. (The bbolt store claims the key last, in a transaction no
// other writer shares; the outcome is the same unless a unit's claim is
// the delivery's own key, which the webhook intake never does.) Runs and
// events are encoded before the transaction.
func (s *Store) CommitDelivery(ctx context.Context, d state.Delivery) (state.DeliveryResult, error) {
	now := s.now()
	records := make([][]byte, len(d.Units))
	events := make([][][]byte, len(d.Units))
	for i, u := range d.Units {
		if u.Run.CreatedAt.IsZero() {
			u.Run.CreatedAt = now
		}
		var err error
		if records[i], err = encodeRun(u.Run); err != nil {
			return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: run %s: %w", d.Key, u.Run.ID, err)
		}
		if events[i], err = s.encodeEvents(u.Events); err != nil {
			return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: run %s: %w", d.Key, u.Run.ID, err)
		}
	}
	var res state.DeliveryResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		res = state.DeliveryResult{} // the function may run again (see write)
		if _, err := tx.Exec(ctx, pruneDedup, now, pruneBatch); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		seen, err := claim(ctx, tx, d.Key, now, d.TTL, nil)
		if err != nil {
			return err
		}
		if seen {
			res.Duplicate = true
			res.Value, err = dedupValue(ctx, tx, d.Key)
			return err
		}
		for i, u := range d.Units {
			if u.Claim != "" {
				seen, err := claim(ctx, tx, u.Claim, now, d.TTL, u.ClaimValue)
				if err != nil {
					return err
				}
				if seen {
					v, err := dedupValue(ctx, tx, u.Claim)
					if err != nil {
						return err
					}
					res.Earlier = append(res.Earlier, v)
					continue
				}
			}
			if err := createRun(ctx, tx, u.Run, records[i], events[i]); err != nil {
				return err
			}
			res.Created = append(res.Created, u.Run.ID)
		}
		if d.Done == nil {
			return nil
		}
		done := orEmpty(d.Done(res.Created, res.Earlier))
		_, err = tx.Exec(ctx, `UPDATE runbook_dedup SET value = $2 WHERE key = $1`, d.Key, done)
		return err
	})
	if err != nil {
		return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: %w", d.Key, err)
	}
	return res, nil
}
