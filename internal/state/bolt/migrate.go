package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// upgradeBatch is how many keys (runs, index entries, audit records) one
// transaction of an upgrade rewrites: the pages a batch frees are reused
// by the next ones, so an upgrade neither holds the whole file's rewrite
// in memory nor doubles the file.
const upgradeBatch = 512

// upgrade brings the runs and audit records of a file of an earlier format
// to the current one, in transactions of upgradeBatch keys: run buckets
// are flattened (formats 1 and 2), step records rewritten compact and
// events put in blocks; run records rewritten compact with their source
// numbered; index entries and audit records rewritten compact. Every step
// leaves what it already converted as it is, and readers read either form,
// so an upgrade cut short goes on at the next open for writing (the format
// is marked current only once it is done).
func (s *Store) upgrade() error {
	steps := []struct {
		bucket []byte
		fn     func(tx *bbolt.Tx, b *bbolt.Bucket, k []byte) error
	}{
		{bucketRunData, upgradeRunData},
		{bucketRuns, upgradeRecord},
		{bucketByCreated, upgradeIndex},
		{bucketAudit, upgradeAudit},
	}
	for _, step := range steps {
		if err := s.inBatches(step.bucket, step.fn); err != nil {
			return fmt.Errorf("%s: %w", step.bucket, err)
		}
	}
	return nil
}

// inBatches calls fn for every key of the top-level bucket name (absent:
// none), upgradeBatch keys per write transaction, in key order. fn may
// change the key's value, not add or delete keys of b.
func (s *Store) inBatches(name []byte, fn func(tx *bbolt.Tx, b *bbolt.Bucket, k []byte) error) error {
	var after []byte
	for {
		var last []byte
		err := s.update(context.Background(), func(tx *bbolt.Tx) error {
			last = nil // the function may run again (see update)
			b := tx.Bucket(name)
			if b == nil {
				return nil
			}
			var keys [][]byte
			c := b.Cursor()
			k, _ := c.First()
			if after != nil {
				if k, _ = c.Seek(after); bytes.Equal(k, after) {
					k, _ = c.Next()
				}
			}
			for ; k != nil && len(keys) < upgradeBatch; k, _ = c.Next() {
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range keys {
				if err := fn(tx, b, k); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
			}
			if len(keys) > 0 {
				last = keys[len(keys)-1]
			}
			return nil
		})
		if err != nil || last == nil {
			return err
		}
		after = last
	}
}

// upgradeRunData flattens a run's bucket (formats 1 and 2), rewrites its
// JSON step records compact and puts its events in blocks.
func upgradeRunData(_ *bbolt.Tx, rundata *bbolt.Bucket, id []byte) error {
	rb := rundata.Bucket(id)
	if rb == nil {
		return nil // not a bucket
	}
	if hasLegacySubs(rb) {
		if err := flatten(rb); err != nil {
			return err
		}
	}
	return compactRun(rb, string(id))
}

// upgradeRecord rewrites a run record that spells its source (JSON, or
// compact of formats 5 to 7) as a sourced record.
func upgradeRecord(tx *bbolt.Tx, runs *bbolt.Bucket, id []byte) error {
	v := runs.Get(id)
	if len(v) > 0 && v[0] == sourcedTag {
		return nil
	}
	r, err := decodeRun(string(id), v, nil) // not sourced: it names no source number
	if err != nil {
		return err
	}
	enc, err := encodeRun(r)
	if err != nil {
		return err
	}
	return enc.write(tx)
}

// upgradeIndex rewrites a JSON index entry compact.
func upgradeIndex(_ *bbolt.Tx, b *bbolt.Bucket, k []byte) error {
	v := b.Get(k)
	if isCompact(v) {
		return nil
	}
	e, err := decodeIndex(v)
	if err != nil {
		return err
	}
	return b.Put(k, encodeIndex(e))
}

// upgradeAudit rewrites a JSON audit record compact.
func upgradeAudit(_ *bbolt.Tx, b *bbolt.Bucket, k []byte) error {
	v := b.Get(k)
	if isCompact(v) {
		return nil
	}
	if len(k) != 8 {
		return fmt.Errorf("audit key %x: %w", k, state.ErrCorrupt)
	}
	r, err := decodeAudit(binary.BigEndian.Uint64(k), v)
	if err != nil {
		return err
	}
	data, err := encodeAudit(&r)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}

// compactRun rewrites the JSON step records of one (flat) run bucket and
// puts its events in blocks (blockEvents).
func compactRun(rb *bbolt.Bucket, id string) error {
	type rewrite struct{ k, v []byte }
	var out []rewrite
	err := scanRun(rb, kindStep, nil, func(k, v []byte) (bool, error) {
		if v == nil || isCompact(v) {
			return true, nil
		}
		rec, err := decodeStep(id, k, v)
		if err != nil {
			return false, err
		}
		data, err := encodeStep(rec)
		if err != nil {
			return false, err
		}
		out = append(out, rewrite{runKey(kindStep, k), data})
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, r := range out {
		if err := rb.Put(r.k, r.v); err != nil {
			return err
		}
	}
	return blockEvents(rb)
}
