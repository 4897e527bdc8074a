package bolt

import (
	"context"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// AllocatedBytes returns the page bytes the store's transactions have
// allocated so far (bbolt's TxStats.PageAlloc), for cost tests.
func AllocatedBytes(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetPageAlloc()
}

// Update runs fn through the store's group committer, as its methods do.
func Update(ctx context.Context, s *Store, fn func(tx *bbolt.Tx) error) error {
	return s.update(ctx, fn)
}

// UpdateUrgent runs fn through the committer's urgent lane, as
// CommitDelivery does.
func UpdateUrgent(ctx context.Context, s *Store, fn func(tx *bbolt.Tx) error) error {
	return s.updateUrgent(ctx, fn)
}

// Queued returns how many update functions wait for the writer, in both
// lanes.
func Queued(s *Store) int {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	n := 0
	for _, r := range append(slices.Clone(s.w.queue), s.w.urgent...) {
		if !r.abandoned {
			n++
		}
	}
	return n
}

// NewLingering opens path with a writer that lingers up to d (instead of
// lingerFor) after a commit of several writes, so tests can see lingering
// without racing a millisecond timer.
func NewLingering(path string, d time.Duration) (*Store, error) {
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	s.w.close()
	s.w = startCommitter(s, d)
	return s, nil
}

// DecodeRun decodes a stored run record (the value of runs/<id>) as the
// store reads it in tx, without filling in its snapshot.
func DecodeRun(tx *bbolt.Tx, id string, v []byte) (*state.Run, error) {
	return decodeRun(id, v, sourcesOf(tx))
}
