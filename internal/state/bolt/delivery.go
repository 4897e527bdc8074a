package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// CommitDelivery commits a webhook delivery in one transaction (see
// state.Delivery): so one delivery costs the shared writer one update,
// not one per claim, run and done record. Runs and events are encoded
// before the transaction; a unit skipped for its claim wastes only that.
func (s *Store) CommitDelivery(ctx context.Context, d state.Delivery) (state.DeliveryResult, error) {
	now := s.now()
	type encoded struct {
		claim []byte
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
		evs, err := s.encodeEvents(1, u.Events)
		if err != nil {
			return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: run %s: %w", d.Key, u.Run.ID, err)
		}
		units[i] = encoded{id: u.Run.ID, run: enc, evs: evs}
		if u.Claim != "" {
			units[i].claim = []byte(u.Claim)
		}
	}
	key := []byte(d.Key)
	var res state.DeliveryResult
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		res = state.DeliveryResult{} // the function may run again (see update)
		b := tx.Bucket(bucketDedup)
		exp := tx.Bucket(bucketDedupExp)
		if err := pruneDedup(b, exp, now); err != nil {
			return err
		}
		if v := b.Get(key); seenWithin(v, now, d.TTL) {
			res.Duplicate = true
			if len(v) > dedupHeader && v[dedupHeader] == dedupHasValue {
				res.Value = append([]byte{}, v[dedupHeader+1:]...) // v is only valid inside the transaction
			}
			return nil
		}
		for _, u := range units {
			if u.claim != nil {
				seen, err := claim(b, exp, u.claim, now, d.TTL)
				if err != nil {
					return err
				}
				if seen {
					continue
				}
			}
			if err := createRun(tx, u.id, u.run, u.evs); err != nil {
				return err
			}
			res.Created = append(res.Created, u.id)
		}
		if _, err := claim(b, exp, key, now, d.TTL); err != nil {
			return err
		}
		if d.Done == nil {
			return nil
		}
		val := d.Done(res.Created)
		v := b.Get(key)
		entry := make([]byte, 0, dedupHeader+1+len(val))
		entry = append(entry, v[:dedupHeader]...)
		entry = append(entry, dedupHasValue)
		return b.Put(key, append(entry, val...))
	})
	if err != nil {
		return state.DeliveryResult{}, fmt.Errorf("commit delivery %s: %w", d.Key, err)
	}
	return res, nil
}
