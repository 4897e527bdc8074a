package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.RunPauseStore = (*Store)(nil)

// bucketRunPauses holds the run pauses, created by the first pause: keyed
// by ID, the value state.RunPause JSON. They are few (an operator's), so
// the selector's uniqueness is checked by reading them all.
var bucketRunPauses = []byte("run_pauses")

// PauseRuns records p unless its ID or selector is recorded already.
func (s *Store) PauseRuns(ctx context.Context, p state.RunPause) error {
	if p.At.IsZero() {
		p.At = s.now()
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pause runs of %s: %w", p.Selector(), err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRunPauses)
		if err != nil {
			return err
		}
		if b.Get([]byte(p.ID)) != nil {
			return state.ErrExists
		}
		err = b.ForEach(func(k, v []byte) error {
			var q state.RunPause
			if err := json.Unmarshal(v, &q); err != nil {
				return fmt.Errorf("%w: run pause %q: %v", state.ErrCorrupt, k, err)
			}
			if q.Pattern == p.Pattern && q.Label == p.Label {
				return state.ErrExists
			}
			return nil
		})
		if err != nil {
			return err
		}
		return b.Put([]byte(p.ID), data)
	})
	if err != nil {
		return fmt.Errorf("pause runs of %s: %w", p.Selector(), err)
	}
	return nil
}

// ResumeRuns deletes pause id and returns it.
func (s *Store) ResumeRuns(ctx context.Context, id string) (*state.RunPause, error) {
	var out *state.RunPause
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketRunPauses)
		if b == nil {
			return state.ErrNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return state.ErrNotFound
		}
		var p state.RunPause
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("%w: run pause %s: %v", state.ErrCorrupt, id, err)
		}
		out = &p
		return b.Delete([]byte(id))
	})
	if err != nil {
		return nil, fmt.Errorf("resume runs (pause %s): %w", id, err)
	}
	return out, nil
}

// RunPauses returns the pauses, oldest first.
func (s *Store) RunPauses(ctx context.Context) ([]state.RunPause, error) {
	var out []state.RunPause
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketRunPauses)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var p state.RunPause
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("%w: run pause %q: %v", state.ErrCorrupt, k, err)
			}
			out = append(out, p)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list run pauses: %w", err)
	}
	slices.SortStableFunc(out, func(a, b state.RunPause) int { return a.At.Compare(b.At) })
	return out, nil
}

// exportRunPauses exports the run pauses, by ID.
func exportRunPauses(tx *bbolt.Tx, fn func(state.Record) error) error {
	b := tx.Bucket(bucketRunPauses)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		p := new(state.RunPause)
		if err := json.Unmarshal(v, p); err != nil {
			return fmt.Errorf("%w: run pause %q: %v", state.ErrCorrupt, k, err)
		}
		return fn(state.Record{Kind: state.KindRunPause, RunPause: p})
	})
}
