package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// CommitDelivery commits a webhook delivery in one transaction (see
// state.Delivery): so one delivery costs the shared writer one update,
// not one per claim, run, body and done record. Runs and events are encoded
// before the transaction; a unit skipped for its claim wastes only that.
func (s *Store) CommitDelivery(ctx context.Context, d state.Delivery) (state.DeliveryResult, error) {
	now := s.now()
	type encoded struct {
		claim []byte
		value []byte
		id    string
		run   *encodedRun
		evs   [][]byte
	}
	units := make([]encoded, len(d.Units))
	for i, u := range d.Units {
		if u.Run.CreatedAt.IsZero() {
			u.Run.CreatedAt = now
		}
		enc, err := encodeRun(u.Run)
		if err != nil {
			return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: run %s: %w", d.Key, u.Run.ID, err)
		}
		evs, err := s.encodeEvents(&encoder{}, u.Events)
		if err != nil {
			return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: run %s: %w", d.Key, u.Run.ID, err)
		}
		units[i] = encoded{id: u.Run.ID, run: enc, evs: evs}
		if u.Claim != "" {
			units[i].claim = []byte(u.Claim)
			units[i].value = u.ClaimValue
		}
	}
	key := []byte(d.Key)
	var res state.DeliveryResult
	err := s.updateUrgent(ctx, func(tx *bbolt.Tx) error {
		res = state.DeliveryResult{} // the function may run again (see update)
		b := tx.Bucket(bucketDedup)
		exp := tx.Bucket(bucketDedupExp)
		if err := pruneDedup(b, exp, now); err != nil {
			return err
		}
		if v := b.Get(key); seenWithin(v, now, d.TTL) {
			res.Duplicate = true
			res.Value = dedupValue(v)
			return nil
		}
		for _, u := range units {
			if u.claim != nil {
				seen, err := claim(b, exp, u.claim, now, d.TTL)
				if err != nil {
					return err
				}
				if seen {
					res.Earlier = append(res.Earlier, dedupValue(b.Get(u.claim)))
					continue
				}
				if u.value != nil {
					if err := putDedupValue(b, u.claim, u.value); err != nil {
						return err
					}
				}
			}
			if err := createRun(tx, u.id, u.run, u.evs); err != nil {
				return err
			}
			res.Created = append(res.Created, u.id)
		}
		if len(res.Created) > 0 && d.ID != "" {
			if err := putDelivery(tx, d.ID, d.Body); err != nil {
				return err
			}
		}
		if _, err := claim(b, exp, key, now, d.TTL); err != nil {
			return err
		}
		if d.Done == nil {
			return nil
		}
		return putDedupValue(b, key, d.Done(res.Created, res.Earlier))
	})
	if err != nil {
		return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: %w", d.Key, err)
	}
	return res, nil
}

// dedupValue returns a copy of the value of dedup entry v (v is only valid
// inside the transaction), nil when it has none.
func dedupValue(v []byte) []byte {
	if len(v) <= dedupHeader || v[dedupHeader] != dedupHasValue {
		return nil
	}
	return append([]byte{}, v[dedupHeader+1:]...)
}

// putDedupValue attaches val to the entry of k, which must exist.
func putDedupValue(b *bbolt.Bucket, k, val []byte) error {
	v := b.Get(k)
	entry := make([]byte, 0, dedupHeader+1+len(val))
	entry = append(entry, v[:dedupHeader]...)
	entry = append(entry, dedupHasValue)
	return b.Put(k, append(entry, val...))
}
