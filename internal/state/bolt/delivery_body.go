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
// stores a body, so a file of an earlier build gains it without a
// migration; an older build ignores it.
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
