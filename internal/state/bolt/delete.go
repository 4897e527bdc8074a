package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// DeleteRun deletes a finished run: its record, its listing entry and its
// bucket (steps, events, intents, approvals), in one transaction. A run
// that is not finished is refused with state.ErrNotFinished, one that does
// not exist with state.ErrNotFound. The playbook snapshot stays: other
// runs of the same source share it.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		r, err := getRun(tx, id)
		if err != nil {
			return err
		}
		if !r.Status.Done() {
			return fmt.Errorf("run %s is %s: %w", id, r.Status, state.ErrNotFinished)
		}
		if err := tx.Bucket(bucketByCreated).Delete(createdKey(r.CreatedAt, r.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketRuns).Delete([]byte(id)); err != nil {
			return err
		}
		if err := deleteOutput(tx, id); err != nil {
			return err
		}
		if runBucket(tx, id) == nil {
			return nil
		}
		return tx.Bucket(bucketRunData).DeleteBucket([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	return nil
}
