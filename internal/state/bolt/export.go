package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

var (
	_ state.Exporter = (*Store)(nil)
	_ state.Importer = (*Store)(nil)
)

// Export calls fn for every record of the file, in one read transaction
// (see state.Exporter). It works on a store opened read-only.
func (s *Store) Export(ctx context.Context, fn func(state.Record) error) error {
	now := s.now()
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		steps := []func(*bbolt.Tx, func(state.Record) error) error{
			func(tx *bbolt.Tx, fn func(state.Record) error) error { return exportRuns(ctx, tx, fn) },
			exportDeliveries,
			exportCursors,
			func(tx *bbolt.Tx, fn func(state.Record) error) error { return exportDedup(tx, now, fn) },
			exportTokens,
			exportAudit,
			exportNotifications,
			exportPauses,
			exportRunPauses,
		}
		for _, step := range steps {
			if err := step(tx, fn); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export %s: %w", s.path, err)
	}
	return nil
}

// exportRuns exports every run, oldest first, each with its records.
func exportRuns(ctx context.Context, tx *bbolt.Tx, fn func(state.Record) error) error {
	c := tx.Bucket(bucketByCreated).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := string(k[8:])
		r, err := getRun(tx, id)
		if err != nil {
			return err
		}
		if err := fn(state.Record{Kind: state.KindRun, Run: r}); err != nil {
			return err
		}
		rb := runBucket(tx, id)
		if rb == nil {
			continue // no run data: nothing more to export
		}
		if err := exportRunData(rb, id, fn); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
	}
	return nil
}

// exportRunData exports one run's steps, events, intents and approvals.
func exportRunData(rb *bbolt.Bucket, id string, fn func(state.Record) error) error {
	err := scanRun(rb, kindOrder, nil, func(_, sid []byte) (bool, error) {
		data := runValue(rb, kindStep, sid)
		if data == nil {
			return false, fmt.Errorf("step %s is ordered but missing: %w", sid, state.ErrCorrupt)
		}
		rec, err := decodeStep(id, sid, data)
		if err != nil {
			return false, err
		}
		return true, fn(state.Record{Kind: state.KindStep, Step: rec})
	})
	if err != nil {
		return err
	}
	err = scanEvents(rb, 0, func(ev state.Event) (bool, error) {
		return true, fn(state.Record{Kind: state.KindEvent, Event: &state.RunEvent{RunID: id, Event: ev}})
	})
	if err != nil {
		return err
	}
	err = scanRun(rb, kindIntent, nil, func(k, v []byte) (bool, error) {
		in := new(state.Intent)
		if err := json.Unmarshal(v, in); err != nil {
			return false, fmt.Errorf("decode intent %s: %w: %w", k, state.ErrCorrupt, err)
		}
		return true, fn(state.Record{Kind: state.KindIntent, Intent: in})
	})
	if err != nil {
		return err
	}
	return scanRun(rb, kindApproval, nil, func(k, v []byte) (bool, error) {
		a := new(state.Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return false, fmt.Errorf("decode approval %s: %w: %w", k, state.ErrCorrupt, err)
		}
		return true, fn(state.Record{Kind: state.KindApproval, Approval: a})
	})
}

func exportDeliveries(tx *bbolt.Tx, fn func(state.Record) error) error {
	b := tx.Bucket(bucketDeliveries)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		return fn(state.Record{Kind: state.KindDelivery, Delivery: &state.StoredDelivery{ID: string(k), Body: bytes.Clone(v)}})
	})
}

func exportCursors(tx *bbolt.Tx, fn func(state.Record) error) error {
	return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
		return fn(state.Record{Kind: state.KindCursor, Cursor: &state.Cursor{Key: string(k), Value: bytes.Clone(v)}})
	})
}

// exportDedup exports the keys live at now.
func exportDedup(tx *bbolt.Tx, now time.Time, fn func(state.Record) error) error {
	return tx.Bucket(bucketDedup).ForEach(func(k, v []byte) error {
		if !liveDedup(v, now) {
			return nil
		}
		d := &state.DedupKey{Key: string(k), FirstSeen: time.Unix(0, int64(binary.BigEndian.Uint64(v))), Value: dedupValue(v)}
		if exp := int64(binary.BigEndian.Uint64(v[8:16])); exp != 0 {
			d.Expires = time.Unix(0, exp)
		}
		return fn(state.Record{Kind: state.KindDedup, Dedup: d})
	})
}

func exportTokens(tx *bbolt.Tx, fn func(state.Record) error) error {
	b := tx.Bucket(bucketTokens)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		t := new(state.Token)
		if err := json.Unmarshal(v, t); err != nil {
			return fmt.Errorf("%w: token %s: %v", state.ErrCorrupt, k, err)
		}
		return fn(state.Record{Kind: state.KindToken, Token: t})
	})
}

func exportAudit(tx *bbolt.Tx, fn func(state.Record) error) error {
	b := tx.Bucket(bucketAudit)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		r, err := decodeAudit(binary.BigEndian.Uint64(k), v)
		if err != nil {
			return err
		}
		return fn(state.Record{Kind: state.KindAudit, Audit: &r})
	})
}

// Import writes records as Export produced them, in one transaction (see
// state.Importer): event and audit numbers, creation times and dedup
// times are kept, not assigned.
func (s *Store) Import(ctx context.Context, recs []state.Record) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		for i, rec := range recs {
			if err := importRecord(tx, rec); err != nil {
				return fmt.Errorf("record %d (%s): %w", i, rec.Kind, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import into %s: %w", s.path, err)
	}
	return nil
}

func importRecord(tx *bbolt.Tx, rec state.Record) error {
	switch {
	case rec.Run != nil:
		enc, err := encodeRun(rec.Run)
		if err != nil {
			return err
		}
		return createRun(tx, rec.Run.ID, enc, nil)
	case rec.Step != nil:
		return importStep(tx, rec.Step)
	case rec.Event != nil:
		return importEvent(tx, rec.Event)
	case rec.Intent != nil:
		return putRunJSON(tx, rec.Intent.RunID, kindIntent, rec.Intent.Step, rec.Intent)
	case rec.Approval != nil:
		return putRunJSON(tx, rec.Approval.RunID, kindApproval, rec.Approval.Step, rec.Approval)
	case rec.Delivery != nil:
		return putDelivery(tx, rec.Delivery.ID, rec.Delivery.Body)
	case rec.Cursor != nil:
		return tx.Bucket(bucketCursors).Put([]byte(rec.Cursor.Key), orEmpty(rec.Cursor.Value))
	case rec.Dedup != nil:
		return importDedup(tx, rec.Dedup)
	case rec.Token != nil:
		return putJSON(tx, bucketTokens, []byte(rec.Token.Name), rec.Token)
	case rec.Audit != nil:
		return importAudit(tx, rec.Audit)
	case rec.Notify != nil:
		return importNotification(tx, rec.Notify)
	case rec.Pause != nil:
		return putJSON(tx, bucketPauses, pauseKey(rec.Pause.Playbook, rec.Pause.Trigger), rec.Pause)
	case rec.RunPause != nil:
		return putJSON(tx, bucketRunPauses, []byte(rec.RunPause.ID), rec.RunPause)
	}
	return fmt.Errorf("a record of kind %q with nothing in it", rec.Kind)
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func importStep(tx *bbolt.Tx, rec *state.StepRecord) error {
	rb, err := mustRunBucket(tx, rec.RunID)
	if err != nil {
		return err
	}
	data, err := encodeStep(rec)
	if err != nil {
		return err
	}
	return putSteps(rb, []*state.StepRecord{rec}, [][]byte{data})
}

func importEvent(tx *bbolt.Tx, ev *state.RunEvent) error {
	rb, err := mustRunBucket(tx, ev.RunID)
	if err != nil {
		return err
	}
	if ev.Seq == 0 {
		return fmt.Errorf("event of run %s without a number", ev.RunID)
	}
	data, err := encodeEvent(&ev.Event)
	if err != nil {
		return err
	}
	return putEvents(rb, ev.Seq, [][]byte{data})
}

func putRunJSON(tx *bbolt.Tx, runID string, kind byte, key string, v any) error {
	rb, err := mustRunBucket(tx, runID)
	if err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return rb.Put(runKey(kind, []byte(key)), data)
}

func putJSON(tx *bbolt.Tx, bucket, key []byte, v any) error {
	b, err := tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// importDedup writes a dedup entry as Dedup and DedupSet would have,
// with its expiry index entry.
func importDedup(tx *bbolt.Tx, d *state.DedupKey) error {
	k := []byte(d.Key)
	entry := make([]byte, dedupHeader, dedupHeader+1+len(d.Value))
	binary.BigEndian.PutUint64(entry, uint64(d.FirstSeen.UnixNano()))
	if !d.Expires.IsZero() {
		at := d.Expires.UnixNano()
		binary.BigEndian.PutUint64(entry[8:], uint64(at))
		if err := tx.Bucket(bucketDedupExp).Put(expiryKey(at, k), nil); err != nil {
			return err
		}
	}
	if d.Value != nil {
		entry = append(append(entry, dedupHasValue), d.Value...)
	}
	return tx.Bucket(bucketDedup).Put(k, entry)
}

func importAudit(tx *bbolt.Tx, r *state.AuditRecord) error {
	if r.Seq == 0 {
		return fmt.Errorf("audit record without a number")
	}
	b, err := tx.CreateBucketIfNotExists(bucketAudit)
	if err != nil {
		return err
	}
	data, err := encodeAudit(r)
	if err != nil {
		return err
	}
	if err := b.Put(binary.BigEndian.AppendUint64(nil, r.Seq), data); err != nil {
		return err
	}
	return b.SetSequence(max(b.Sequence(), r.Seq))
}
