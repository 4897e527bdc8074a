package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// CommitDelivery commits a webhook delivery in one transaction (see
// state.Delivery). The delivery's key is claimed first: a replica
// committing the same delivery at the same moment waits on that row and
// then finds the key live, a duplicate, whichever replica took the
// webhook. (The bbolt store claims the key last, in a transaction no
// other writer shares; the outcome is the same unless a unit's claim is
// the delivery's own key, which the webhook intake never does.)
//
// Before claiming anything, the transaction takes an advisory lock for
// each key it will claim, in one order for every transaction (see
// claimLocks): two deliveries of the same hooks in another order (a
// redelivery on another replica) then wait for each other instead of
// deadlocking, which PostgreSQL would detect only after deadlock_timeout
// (a second) and break by aborting one. Runs and events are encoded
// before the transaction.
//
// A new delivery (every key new, the common case) is committed with the
// other new deliveries waiting at the same moment, in one transaction of
// four statements (see commitGroup); a delivery that one of its keys
// refuses is then committed alone, statement by statement, below.
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
	locks := claimLocks(d)
	res, fresh, err := s.commitNew(ctx, d, now, locks, records, events)
	if err != nil {
		return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: %w", d.Key, err)
	}
	if fresh {
		s.bodies.keep(d.ID, d.Body, len(res.Created) > 0)
		return res, nil
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		res = state.DeliveryResult{} // the function may run again (see write)
		if _, err := tx.Exec(ctx, lockClaims, locks); err != nil {
			return fmt.Errorf("lock claims: %w", err)
		}
		seen, err := claim(ctx, tx, d.Key, now, d.TTL, nil)
		if err != nil {
			return err
		}
		if seen {
			res.Duplicate = true
			if res.Value, err = dedupValue(ctx, tx, d.Key); err != nil {
				return err
			}
			return s.prune(ctx, tx, now)
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
			b := &pgx.Batch{}
			queueCreateRun(b, u.Run, records[i], events[i])
			if err := createRunError(u.Run.ID, tx.SendBatch(ctx, b).Close()); err != nil {
				return err
			}
			res.Created = append(res.Created, u.Run.ID)
		}
		if len(res.Created) > 0 && d.ID != "" {
			if err := putDelivery(ctx, tx, d.ID, d.Body, now); err != nil {
				return err
			}
		}
		if d.Done != nil {
			done := orEmpty(d.Done(res.Created, res.Earlier))
			if _, err := tx.Exec(ctx, setDone, d.Key, done); err != nil {
				return err
			}
		}
		return s.prune(ctx, tx, now)
	})
	if err != nil {
		return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: %w", d.Key, err)
	}
	s.bodies.keep(d.ID, d.Body, len(res.Created) > 0)
	return res, nil
}

// commitNew commits a delivery whose keys are all new, reporting fresh
// false, having written nothing, when it cannot: one of its keys is
// recorded, it claims a key twice (whose second insert would fail the
// claims), or something else refuses it (a hook recorded under another
// delivery key, a taken run ID). It goes with the other deliveries
// waiting at the same moment (see commitGroup) and, when its group was
// refused, again in a group of its own. An error is returned only when
// the database could not be asked (then, as for any transaction, whether
// it committed may be unknown).
func (s *Store) commitNew(ctx context.Context, d state.Delivery, now time.Time, locks []int64, records [][]byte, events [][][]byte) (state.DeliveryResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return state.DeliveryResult{}, false, err
	}
	if len(locks) != 1+countClaims(d) {
		return state.DeliveryResult{}, false, nil // a key claimed twice: decided statement by statement
	}
	r := &groupReq{d: d, now: now, locks: locks, records: records, events: events}
	var created []string
	created, r.done = freshOutcome(d)
	err := s.groups.do(ctx, r)
	if err == nil && r.outcome == groupFailed {
		s.commitGroup(ctx, []*groupReq{r}) // alone
	}
	if err == nil {
		err = r.err
	}
	if err != nil {
		return state.DeliveryResult{}, false, err
	}
	if r.outcome != groupCommitted {
		return state.DeliveryResult{}, false, nil
	}
	s.keepCommittedClaims(d)
	return state.DeliveryResult{Created: created}, true, nil
}

// keepCommittedClaims keeps, for the engine's first read, the step
// records (none) and status of the runs of d committed already claimed
// (their record names an owner: the replica that prepared them), as a
// claim keeps what it read (claimGroup): the run is the replica's from
// its commit, so only the replica's own writes change its steps.
func (s *Store) keepCommittedClaims(d state.Delivery) {
	for _, u := range d.Units {
		if u.Run.Owner != "" {
			s.claims.keep(u.Run.ID, keptSteps{status: u.Run.Status})
		}
	}
}

// freshOutcome is what a delivery whose keys are all new makes: a run
// for each unit (created), and the done value for them (nil: none).
func freshOutcome(d state.Delivery) (created []string, done []byte) {
	for _, u := range d.Units {
		created = append(created, u.Run.ID)
	}
	if d.Done != nil {
		done = orEmpty(d.Done(created, nil))
	}
	return created, done
}

// countClaims returns the number of d's units with a claim.
func countClaims(d state.Delivery) int {
	n := 0
	for _, u := range d.Units {
		if u.Claim != "" {
			n++
		}
	}
	return n
}

// lockClaims takes the advisory locks $1 (see claimLocks), in order.
const lockClaims = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`

// setDone attaches value $2 to the delivery's key $1.
const setDone = `UPDATE runbook_dedup SET value = $2 WHERE key = $1`

// claimLocks returns the advisory lock keys of the dedup keys a delivery
// claims: a 64-bit hash of each, distinct and ascending, the order in
// which every delivery takes them. A collision of two keys' hashes costs
// only a wait. The keys share PostgreSQL's advisory lock space with the
// migration lock (a pair of 32-bit halves there): a collision with it
// would also cost only a wait.
func claimLocks(d state.Delivery) []int64 {
	keys := []int64{lockKey(d.Key)}
	for _, u := range d.Units {
		if u.Claim != "" {
			keys = append(keys, lockKey(u.Claim))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func lockKey(key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("runbook/dedup/" + key)) // never fails
	return int64(h.Sum64())
}
