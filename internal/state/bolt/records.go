package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// PutIntent records (or replaces) the intent of a run's step. It fails with
// state.ErrNotFound when the run does not exist.
func (s *Store) PutIntent(ctx context.Context, in state.Intent) error {
	if err := s.putRunRecord(ctx, in.RunID, kindIntent, in.Step, in); err != nil {
		return fmt.Errorf("put intent %s/%s: %w", in.RunID, in.Step, err)
	}
	return nil
}

// GetIntent returns the intent of a run's step or state.ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, runID, step string) (*state.Intent, error) {
	in := new(state.Intent)
	if err := s.getRunRecord(ctx, runID, kindIntent, step, in); err != nil {
		return nil, fmt.Errorf("get intent %s/%s: %w", runID, step, err)
	}
	return in, nil
}

// AnswerApproval answers a run's approval step as a compare-and-set (see
// state.Store): the step's record and the approval are read, decided on
// and written, with the decision's events, in one write transaction, and
// bbolt runs one write transaction at a time, so no answer is decided on
// a record another answer has changed since. decide's error is returned
// as it is.
func (s *Store) AnswerApproval(ctx context.Context, runID, step string, decide state.Decide) error {
	var refused error
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		refused = nil // the function may run again (see update)
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		rec, prev, err := readApproval(rb, runID, step)
		if err != nil {
			return err
		}
		next, events, err := decide(rec, prev)
		if err != nil {
			refused = err
			return err
		}
		if next == nil {
			return nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		evs, err := s.encodeEvents(&encoder{}, events)
		if err != nil {
			return err
		}
		if err := rb.Put(runKey(kindApproval, []byte(step)), data); err != nil {
			return err
		}
		return appendEvents(rb, evs)
	})
	switch {
	case refused != nil:
		return refused
	case err != nil:
		return fmt.Errorf("answer approval %s/%s: %w", runID, step, err)
	}
	return nil
}

// readApproval reads what AnswerApproval decides on: the step's record and
// its approval, each nil when there is none.
func readApproval(rb *bbolt.Bucket, runID, step string) (*state.StepRecord, *state.Approval, error) {
	var rec *state.StepRecord
	if data := runValue(rb, kindStep, []byte(step)); data != nil {
		var err error
		if rec, err = decodeStep(runID, []byte(step), data); err != nil {
			return nil, nil, err
		}
	}
	data := runValue(rb, kindApproval, []byte(step))
	if data == nil {
		return rec, nil, nil
	}
	prev := new(state.Approval)
	if err := json.Unmarshal(data, prev); err != nil {
		return nil, nil, fmt.Errorf("decode approval: %w: %w", state.ErrCorrupt, err)
	}
	return rec, prev, nil
}

// GetApproval returns the answer to a run's approval step or
// state.ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, runID, step string) (*state.Approval, error) {
	a := new(state.Approval)
	if err := s.getRunRecord(ctx, runID, kindApproval, step, a); err != nil {
		return nil, fmt.Errorf("get approval %s/%s: %w", runID, step, err)
	}
	return a, nil
}

func (s *Store) putRunRecord(ctx context.Context, runID string, kind byte, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		return rb.Put(runKey(kind, []byte(key)), data)
	})
}

func (s *Store) getRunRecord(ctx context.Context, runID string, kind byte, key string, v any) error {
	return s.view(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		data := runValue(rb, kind, []byte(key))
		if data == nil {
			return state.ErrNotFound
		}
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decode: %w: %w", state.ErrCorrupt, err)
		}
		return nil
	})
}

// AcquireLock takes l.Key for l.Owner when it is free, or reports true
// without change when l.Owner already holds it. Otherwise it returns false
// and the holder. A zero l.Since is set to now.
func (s *Store) AcquireLock(ctx context.Context, l state.Lock) (ok bool, holder *state.Lock, err error) {
	if l.Since.IsZero() {
		l.Since = s.now()
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		ok, holder = false, nil // the function may run again (see update)
		b := tx.Bucket(bucketLocks)
		key := []byte(l.Key)
		if data := b.Get(key); data != nil {
			cur := new(state.Lock)
			if err := json.Unmarshal(data, cur); err != nil {
				return fmt.Errorf("decode lock: %w: %w", state.ErrCorrupt, err)
			}
			if cur.Owner == l.Owner {
				ok = true
				return nil
			}
			if !heldByEndedRun(tx, cur.Owner) {
				holder = cur
				return nil
			}
		}
		data, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("encode lock: %w", err)
		}
		ok = true
		return b.Put(key, data)
	})
	if err != nil {
		return false, nil, fmt.Errorf("acquire lock %s: %w", l.Key, err)
	}
	return ok, holder, nil
}

// heldByEndedRun reports whether owner is a run recorded with a status
// that frees its key (state.RunStatus.KeyFreed). It decodes the record
// alone, not the playbook snapshot getRun copies in: a busy key is asked
// about at every poll of every run queued on it.
func heldByEndedRun(tx *bbolt.Tx, owner string) bool {
	data := tx.Bucket(bucketRuns).Get([]byte(owner))
	if data == nil {
		return false
	}
	r, err := decodeRun(owner, data, sourcesOf(tx))
	return err == nil && r.Status.KeyFreed()
}

// ReleaseLock frees key when owner holds it. A free key is not an error;
// a key held by someone else is left held and reported as an error.
func (s *Store) ReleaseLock(ctx context.Context, key, owner string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLocks)
		data := b.Get([]byte(key))
		if data == nil {
			return nil
		}
		var cur state.Lock
		if err := json.Unmarshal(data, &cur); err != nil {
			return fmt.Errorf("decode lock: %w: %w", state.ErrCorrupt, err)
		}
		if cur.Owner != owner {
			return fmt.Errorf("%w: held by %s, not %s", state.ErrHeldByAnother, cur.Owner, owner)
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("release lock %s: %w", key, err)
	}
	return nil
}

// Locks returns the held locks ordered by key.
func (s *Store) Locks(ctx context.Context) ([]state.Lock, error) {
	var out []state.Lock
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketLocks).ForEach(func(k, v []byte) error {
			var l state.Lock
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("decode lock %s: %w: %w", k, state.ErrCorrupt, err)
			}
			out = append(out, l)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return out, nil
}
