package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var _ state.ScheduleStore = (*Store)(nil)

// bucketPauses holds the schedule pauses, created by the first pause:
// keyed by playbook name, a zero byte and the trigger index plus one
// (big-endian, so AllTriggers sorts first), the value state.SchedulePause
// JSON.
var bucketPauses = []byte("schedule_pauses")

func pauseKey(playbook string, trigger int) []byte {
	k := make([]byte, 0, len(playbook)+9)
	k = append(k, playbook...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(int64(trigger)+1))
}

// PauseSchedule records p, replacing the pause of its playbook and trigger.
func (s *Store) PauseSchedule(ctx context.Context, p state.SchedulePause) error {
	if p.At.IsZero() {
		p.At = s.now()
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", p.Playbook, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPauses)
		if err != nil {
			return err
		}
		return b.Put(pauseKey(p.Playbook, p.Trigger), data)
	})
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", p.Playbook, err)
	}
	return nil
}

// ResumeSchedule deletes the pause of playbook's trigger and returns it.
func (s *Store) ResumeSchedule(ctx context.Context, playbook string, trigger int) (*state.SchedulePause, error) {
	var out *state.SchedulePause
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketPauses)
		if b == nil {
			return state.ErrNotFound
		}
		k := pauseKey(playbook, trigger)
		v := b.Get(k)
		if v == nil {
			return state.ErrNotFound
		}
		var p state.SchedulePause
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("%w: schedule pause %s: %v", state.ErrCorrupt, playbook, err)
		}
		out = &p
		return b.Delete(k)
	})
	if err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", playbook, err)
	}
	return out, nil
}

// exportPauses exports the schedule pauses, by playbook and trigger.
func exportPauses(tx *bbolt.Tx, fn func(state.Record) error) error {
	b := tx.Bucket(bucketPauses)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		p := new(state.SchedulePause)
		if err := json.Unmarshal(v, p); err != nil {
			return fmt.Errorf("%w: schedule pause %q: %v", state.ErrCorrupt, k, err)
		}
		return fn(state.Record{Kind: state.KindPause, Pause: p})
	})
}

// SchedulePauses returns the pauses of playbook ("": every playbook).
func (s *Store) SchedulePauses(ctx context.Context, playbook string) ([]state.SchedulePause, error) {
	var out []state.SchedulePause
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		out = nil
		b := tx.Bucket(bucketPauses)
		if b == nil {
			return nil
		}
		var prefix []byte
		if playbook != "" {
			prefix = append([]byte(playbook), 0)
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var p state.SchedulePause
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("%w: schedule pause %q: %v", state.ErrCorrupt, k, err)
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list schedule pauses: %w", err)
	}
	return out, nil
}
