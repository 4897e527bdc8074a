package bolt

import (
	"bytes"
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// bucketDeliveries holds the body of each webhook delivery that started
// runs, by delivery ID (state.Delivery.ID): stored once, referred to by
// its runs (state.DeliveryRef). It is created by the first delivery that
// stores a body.
var bucketDeliveries = []byte("deliveries")

// putDelivery stores body under id; a taken id is state.ErrExists.
func putDelivery(tx *bbolt.Tx, id string, body []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketDeliveries)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketDeliveries, err)
	}
	if b.Get([]byte(id)) != nil {
		return fmt.Errorf("delivery %s: %w", id, state.ErrExists)
	}
	if body == nil {
		body = []byte{}
	}
	return b.Put([]byte(id), body)
}

// GetDelivery returns the body stored under id, or state.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketDeliveries)
		if b == nil {
			return state.ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return state.ErrNotFound
		}
		out = bytes.Clone(v) // v is only valid inside the transaction
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get delivery %s: %w", id, err)
	}
	return out, nil
}

// deliveryOf returns the delivery a stored run record (run id, value v)
// refers to, if any, reading no more of it than it must.
func deliveryOf(id, v []byte) (delivery string, ok bool, err error) {
	delivery, ok, err = deliveryOfRecord(v)
	if err != nil {
		return "", false, fmt.Errorf("decode run %s: %w: %w", id, state.ErrCorrupt, err)
	}
	return delivery, ok, nil
}

// DeleteUnusedDeliveries deletes the bodies no run refers to, in one
// write transaction: bbolt runs writes one at a time, so no run that
// refers to a body can be created while the runs are read (CreateRun
// checks that the body it refers to exists).
func (s *Store) DeleteUnusedDeliveries(ctx context.Context) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(bucketDeliveries)
		if b == nil || b.Stats().KeyN == 0 {
			return nil
		}
		used := map[string]bool{}
		err := tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			id, ok, err := deliveryOf(k, v)
			if ok {
				used[id] = true
			}
			return err
		})
		if err != nil {
			return err
		}
		var unused [][]byte
		err = b.ForEach(func(k, _ []byte) error {
			if !used[string(k)] {
				unused = append(unused, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range unused {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(unused)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete unused deliveries: %w", err)
	}
	return n, nil
}

// deliveryExists reports whether the body of delivery id is stored.
func deliveryExists(tx *bbolt.Tx, id string) bool {
	b := tx.Bucket(bucketDeliveries)
	return b != nil && b.Get([]byte(id)) != nil
}
