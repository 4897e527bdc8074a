package bolt

import (
	"context"
	"fmt"
	"math"
	"sync"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// SaveStep writes one step record and appends events, in one transaction.
// It writes only that record, its order entry (the first time) and the
// events: never the run or other steps. It fails with state.ErrNotFound
// when the run does not exist.
func (s *Store) SaveStep(ctx context.Context, rec *state.StepRecord, events ...state.Event) error {
	return s.SaveSteps(ctx, []*state.StepRecord{rec}, events...)
}

// SaveSteps writes several step records of one run, appends events and
// the records' Printed output, in one transaction, as SaveStep does for
// one.
func (s *Store) SaveSteps(ctx context.Context, recs []*state.StepRecord, events ...state.Event) error {
	if len(recs) == 0 {
		return nil
	}
	runID := recs[0].RunID
	e := encoders.Get().(*encoder)
	defer e.release()
	steps, err := encodeSteps(e, recs)
	if err != nil {
		return err
	}
	evs, err := s.encodeEvents(e, events)
	if err != nil {
		return fmt.Errorf("save steps of run %s: %w", runID, err)
	}
	printed, err := state.EncodeOutput(state.PrintedOutput(recs), s.now())
	if err != nil {
		return fmt.Errorf("save steps of run %s: %w", runID, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		if err := putSteps(rb, recs, steps); err != nil {
			return err
		}
		if _, err := putOutput(tx, runID, printed); err != nil {
			return err
		}
		return appendEvents(rb, evs)
	})
	if err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("save step %s/%s: %w", runID, recs[0].ID, err)
		}
		return fmt.Errorf("save %d steps of run %s: %w", len(recs), runID, err)
	}
	return nil
}

// encoders hold the buffers SaveSteps, a run's write at each step,
// encodes into. A buffer is put back once the write has returned: bbolt
// keeps a value put in a transaction until the transaction ends, and the
// writer never runs an update again after answering it.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxPooledBuffer bounds the buffers kept in encoders: a rare large write
// does not hold its buffer.
const maxPooledBuffer = 64 << 10

// release puts e back in encoders, empty.
func (e *encoder) release() {
	if cap(e.b) > maxPooledBuffer {
		return
	}
	e.b = e.b[:0]
	encoders.Put(e)
}

// encodeSteps encodes step records of one run, appending to e's buffer.
func encodeSteps(e *encoder, recs []*state.StepRecord) ([][]byte, error) {
	data := make([][]byte, len(recs))
	for i, rec := range recs {
		if rec.RunID != recs[0].RunID {
			return nil, fmt.Errorf("save steps: records of runs %s and %s in one call", recs[0].RunID, rec.RunID)
		}
		b, err := e.step(rec)
		if err != nil {
			return nil, fmt.Errorf("save step %s/%s: encode: %w", rec.RunID, rec.ID, err)
		}
		data[i] = b
	}
	return data, nil
}

// putSteps writes encoded step records into their run's bucket, giving a
// step saved for the first time its order entry.
func putSteps(rb *bbolt.Bucket, recs []*state.StepRecord, data [][]byte) error {
	for i, rec := range recs {
		key := runKey(kindStep, []byte(rec.ID))
		if rb.Get(key) == nil {
			n, err := nextOrder(rb)
			if err != nil {
				return err
			}
			if err := rb.Put(numKey(kindOrder, n), []byte(rec.ID)); err != nil {
				return err
			}
		}
		if err := rb.Put(key, data[i]); err != nil {
			return err
		}
	}
	return nil
}

// GetStep returns one step record or state.ErrNotFound.
func (s *Store) GetStep(ctx context.Context, runID, stepID string) (*state.StepRecord, error) {
	var rec *state.StepRecord
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		data := runValue(rb, kindStep, []byte(stepID))
		if data == nil {
			return fmt.Errorf("step %s: %w", stepID, state.ErrNotFound)
		}
		rec, err = decodeStep(runID, []byte(stepID), data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get step %s/%s: %w", runID, stepID, err)
	}
	return rec, nil
}

// Steps returns a run's step records in the order they were first saved,
// or state.ErrNotFound when the run does not exist.
func (s *Store) Steps(ctx context.Context, runID string) ([]*state.StepRecord, error) {
	var out []*state.StepRecord
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		return scanRun(rb, kindOrder, nil, func(_, id []byte) (bool, error) {
			data := runValue(rb, kindStep, id)
			if data == nil {
				return false, fmt.Errorf("step %s is ordered but missing: %w", id, state.ErrCorrupt)
			}
			rec, err := decodeStep(runID, id, data)
			if err != nil {
				return false, err
			}
			out = append(out, rec)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", runID, err)
	}
	return out, nil
}

// AppendEvents appends events to a run's log, or fails with
// state.ErrNotFound when the run does not exist.
func (s *Store) AppendEvents(ctx context.Context, runID string, events ...state.Event) error {
	evs, err := s.encodeEvents(&encoder{}, events)
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		return appendEvents(rb, evs)
	})
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	return nil
}

// encodeEvents encodes events (without their numbers, see encodeEvent),
// appending to e's buffer; a zero Time is set to now.
func (s *Store) encodeEvents(e *encoder, events []state.Event) ([][]byte, error) {
	out := make([][]byte, len(events))
	for i, ev := range events {
		if ev.Time.IsZero() {
			ev.Time = s.now()
		}
		data, err := e.event(&ev)
		if err != nil {
			return nil, fmt.Errorf("encode event %s: %w", ev.Type, err)
		}
		out[i] = data
	}
	return out, nil
}

// Events returns a run's events with Seq > after, at most limit (0: all).
// It seeks straight to the block holding after+1. It fails with state.ErrNotFound when the
// run does not exist.
func (s *Store) Events(ctx context.Context, runID string, after uint64, limit int) ([]state.Event, error) {
	var out []state.Event
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		rb, err := mustRunBucket(tx, runID)
		if err != nil {
			return err
		}
		if after == math.MaxUint64 {
			return nil
		}
		return scanEvents(rb, after+1, func(ev state.Event) (bool, error) {
			if limit > 0 && len(out) >= limit {
				return false, nil
			}
			out = append(out, ev)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return out, nil
}
