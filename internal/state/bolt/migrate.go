package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// compactVersion is the format version that writes events, step records
// and index entries in the compact encoding (codec.go) instead of JSON;
// compactRunsVersion writes run records compact too, compactAuditVersion
// audit records; sourcesVersion names a run's source by number
// (sources.go).
const (
	compactVersion      = 4
	compactRunsVersion  = 5
	compactAuditVersion = 6
	sourcesVersion      = 8
)

// migrateCompact rewrites the JSON run records, events, step records,
// listing index entries and audit records of a file of format 7 or
// earlier in the compact encoding, its run records with their sources
// numbered, and its events in blocks, in the caller's transaction, run by run; values already
// compact are left as they are. Run buckets that fit inline once rewritten are
// stored inline from this commit on (their pages are freed for later
// writes).
func migrateCompact(tx *bbolt.Tx) error {
	rundata := tx.Bucket(bucketRunData)
	var ids [][]byte
	err := rundata.ForEach(func(id, v []byte) error {
		if v == nil {
			ids = append(ids, bytes.Clone(id))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := compactRun(rundata.Bucket(id), string(id)); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
	}
	if err := compactRecords(tx); err != nil {
		return err
	}
	if err := compactAudit(tx.Bucket(bucketAudit)); err != nil {
		return err
	}
	return compactIndex(tx.Bucket(bucketByCreated))
}

// compactAudit rewrites the JSON records of the audit bucket (nil: a file
// that never had one).
func compactAudit(b *bbolt.Bucket) error {
	if b == nil {
		return nil
	}
	var out []rewrite
	err := b.ForEach(func(k, v []byte) error {
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
			return fmt.Errorf("audit record %d: %w", r.Seq, err)
		}
		out = append(out, rewrite{bytes.Clone(k), data})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range out {
		if err := b.Put(r.k, r.v); err != nil {
			return err
		}
	}
	return nil
}

// compactRecords rewrites the run records that spell their source (JSON,
// or compact of formats 5 to 7) as sourced records, numbering their
// sources, in the caller's write transaction.
func compactRecords(tx *bbolt.Tx) error {
	sources := sourcesOf(tx)
	var runs []*state.Run
	err := tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
		if len(v) > 0 && v[0] == sourcedTag {
			return nil
		}
		r, err := decodeRun(string(k), v, sources)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range runs {
		enc, err := encodeRun(r)
		if err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
		if err := enc.write(tx); err != nil {
			return fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	return nil
}

type rewrite struct{ k, v []byte }

// compactRun rewrites the JSON step records of one (flat) run bucket and
// puts its events in blocks (blockEvents).
func compactRun(rb *bbolt.Bucket, id string) error {
	var out []rewrite
	err := rb.ForEach(func(k, v []byte) error {
		if v == nil || len(k) == 0 || isCompact(v) {
			return nil
		}
		var data []byte
		switch k[0] {
		case kindStep:
			rec := new(state.StepRecord)
			if err := json.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("decode step %s: %w: %w", k[1:], state.ErrCorrupt, err)
			}
			var err error
			if data, err = encodeStep(rec); err != nil {
				return err
			}
		default:
			return nil
		}
		out = append(out, rewrite{bytes.Clone(k), data})
		return nil
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

// compactIndex rewrites the JSON entries of runs_by_created.
func compactIndex(b *bbolt.Bucket) error {
	var out []rewrite
	err := b.ForEach(func(k, v []byte) error {
		if isCompact(v) {
			return nil
		}
		e, err := decodeIndex(v)
		if err != nil {
			return err
		}
		out = append(out, rewrite{bytes.Clone(k), encodeIndex(e)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range out {
		if err := b.Put(r.k, r.v); err != nil {
			return err
		}
	}
	return nil
}
