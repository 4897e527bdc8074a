package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// indexEntry is the value of a runs_by_created key: what ListRuns filters
// on, so runs that do not match are never decoded.
type indexEntry struct {
	Status   state.RunStatus
	Playbook string
	ParentID string
}

// createdKey orders runs by creation time, then ID. The sign bit is flipped
// so that times before 1970 sort first too.
func createdKey(t time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano())^(1<<63))
	return append(k, id...)
}

// CreateRun stores a new run and its first events. It fails with
// state.ErrExists when the ID is taken. A zero CreatedAt is set to now,
// in r too. Everything is encoded before the transaction, so the shared
// writer spends its time on bbolt only.
func (s *Store) CreateRun(ctx context.Context, r *state.Run, events ...state.Event) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	enc, err := encodeRun(r)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	evs, err := s.encodeEvents(&encoder{}, events)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		if r.Delivery != nil && !deliveryExists(tx, r.Delivery.ID) {
			return fmt.Errorf("its delivery %s: %w", r.Delivery.ID, state.ErrNotFound)
		}
		return createRun(tx, r.ID, enc, evs)
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// createRun writes a new run, encoded, with its first events; it fails
// with state.ErrExists when the ID is taken. The run's bucket starts with
// the events only, small enough to be stored inline (see rundata.go).
func createRun(tx *bbolt.Tx, id string, enc *encodedRun, evs [][]byte) error {
	if tx.Bucket(bucketRuns).Get([]byte(id)) != nil {
		return fmt.Errorf("run %s: %w", id, state.ErrExists)
	}
	rb, err := tx.Bucket(bucketRunData).CreateBucket([]byte(id))
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	if err := enc.write(tx); err != nil {
		return err
	}
	return appendEvents(rb, evs)
}

// SaveRun replaces a run's record and appends events. It fails with
// state.ErrNotFound for a run never created. A zero CreatedAt keeps the
// stored one. The record and events are encoded before the transaction
// (unless CreatedAt is zero: the stored one is read first), so the shared
// writer spends its time on bbolt only.
func (s *Store) SaveRun(ctx context.Context, r *state.Run, events ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, events...)
}

// SaveRunSteps writes step records of r, then r, and appends events, in
// one transaction (see SaveSteps and SaveRun).
func (s *Store) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, events ...state.Event) error {
	var enc *encodedRun
	if !r.CreatedAt.IsZero() {
		var err error
		if enc, err = encodeRun(r); err != nil {
			return fmt.Errorf("save run %s: %w", r.ID, err)
		}
	}
	for _, rec := range recs {
		if rec.RunID != r.ID {
			return fmt.Errorf("save run %s: a record of run %s", r.ID, rec.RunID)
		}
	}
	e := &encoder{}
	steps, err := encodeSteps(e, recs)
	if err != nil {
		return err
	}
	evs, err := s.encodeEvents(e, events)
	if err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, err)
	}
	printed, err := state.EncodeOutput(state.PrintedOutput(recs), s.now())
	if err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, err)
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		if enc == nil {
			old, err := getRun(tx, r.ID)
			if err != nil {
				return err
			}
			if err := putRun(tx, r, old); err != nil {
				return err
			}
		} else if err := replaceRun(tx, enc); err != nil {
			return err
		}
		rb := runBucket(tx, r.ID)
		if err := putSteps(rb, recs, steps); err != nil {
			return err
		}
		if _, err := putOutput(tx, r.ID, printed); err != nil {
			return err
		}
		return appendEvents(rb, evs)
	})
	if err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, err)
	}
	return nil
}

// replaceRun writes an encoded run over the stored one. The stored record
// is decoded only when its creation time differs (its index entry is not
// the new one), to delete its old index entry.
func replaceRun(tx *bbolt.Tx, enc *encodedRun) error {
	data := tx.Bucket(bucketRuns).Get(enc.id)
	if data == nil {
		return fmt.Errorf("run %s: %w", enc.id, state.ErrNotFound)
	}
	byCreated := tx.Bucket(bucketByCreated)
	if byCreated.Get(enc.idxKey) == nil {
		old, err := decodeRun(string(enc.id), data, sourcesOf(tx))
		if err != nil {
			return err
		}
		if err := byCreated.Delete(createdKey(old.CreatedAt, old.ID)); err != nil {
			return err
		}
	}
	return enc.write(tx)
}

// putRun writes r and its index entry; old is the stored record, if any.
func putRun(tx *bbolt.Tx, r *state.Run, old *state.Run) error {
	rec := r
	if old != nil && r.CreatedAt.IsZero() {
		cp := *r
		cp.CreatedAt = old.CreatedAt
		rec = &cp
	}
	enc, err := encodeRun(rec)
	if err != nil {
		return err
	}
	if old != nil && !old.CreatedAt.Equal(rec.CreatedAt) {
		if err := tx.Bucket(bucketByCreated).Delete(createdKey(old.CreatedAt, old.ID)); err != nil {
			return err
		}
	}
	return enc.write(tx)
}

// encodedRun is a run record and its index entry, ready to write, with
// the playbook snapshot the record leaves out (stored once per hash). The
// record is its body (encodeRunBody): the number of its source, encoded
// as its key (sourceKey), is found or given in the write transaction.
type encodedRun struct {
	id, body, idxKey, entry, srcKey []byte
	hash, snapshot                  []byte
	full                            func() ([]byte, error) // the body with its snapshot
}

// encodeRun encodes r without its snapshot when it has a hash: the
// snapshot goes to snapshots/<hash>, shared by every run of that source,
// so that a run record stays small (most runs of a playbook share one).
func encodeRun(r *state.Run) (*encodedRun, error) {
	rec := r
	if r.Hash != "" && len(r.Snapshot) > 0 {
		cp := *r
		cp.Snapshot = nil
		rec = &cp
	}
	body, err := encodeRunBody(rec)
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	entry := encodeIndex(indexEntry{Status: r.Status, Playbook: r.Playbook, ParentID: r.ParentID})
	enc := &encodedRun{id: []byte(r.ID), body: body, idxKey: createdKey(r.CreatedAt, r.ID), entry: entry,
		srcKey: sourceKey(runSource{playbook: r.Playbook, file: r.File, hash: r.Hash})}
	if rec != r {
		enc.hash, enc.snapshot = []byte(r.Hash), r.Snapshot
		enc.full = func() ([]byte, error) { return encodeRunBody(r) }
	}
	return enc, nil
}

func (e *encodedRun) write(tx *bbolt.Tx) error {
	body := e.body
	if e.hash != nil {
		snaps := tx.Bucket(bucketSnapshots)
		switch old := snaps.Get(e.hash); {
		case old == nil:
			if err := snaps.Put(e.hash, e.snapshot); err != nil {
				return err
			}
		case !bytes.Equal(old, e.snapshot):
			// Not the source this hash was first stored with: keep the
			// snapshot in the record rather than trust the hash.
			var err error
			if body, err = e.full(); err != nil {
				return fmt.Errorf("encode run: %w", err)
			}
		}
	}
	src, err := sourceNumber(tx, e.srcKey)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketByCreated).Put(e.idxKey, e.entry); err != nil {
		return err
	}
	return tx.Bucket(bucketRuns).Put(e.id, sourcedRecord(src, body))
}

func getRun(tx *bbolt.Tx, id string) (*state.Run, error) {
	data := tx.Bucket(bucketRuns).Get([]byte(id))
	if data == nil {
		return nil, fmt.Errorf("run %s: %w", id, state.ErrNotFound)
	}
	r, err := decodeRun(id, data, sourcesOf(tx))
	if err != nil {
		return nil, err
	}
	return withSnapshot(tx, r, nil), nil
}

// withSnapshot fills in the snapshot a record left to snapshots/<hash>.
// A record with its snapshot inline (its hash was first stored with
// another source) keeps it. With a cache, runs of one hash share one
// copy of the snapshot (a listing of many runs of one playbook holds its
// source once, not once per run).
func withSnapshot(tx *bbolt.Tx, r *state.Run, cache map[string][]byte) *state.Run {
	if len(r.Snapshot) > 0 || r.Hash == "" {
		return r
	}
	if s, ok := cache[r.Hash]; ok {
		r.Snapshot = s
		return r
	}
	if s := tx.Bucket(bucketSnapshots).Get([]byte(r.Hash)); s != nil {
		r.Snapshot = bytes.Clone(s)
	}
	if cache != nil {
		cache[r.Hash] = r.Snapshot
	}
	return r
}

// runBucket returns the bucket of an existing run, or nil.
func runBucket(tx *bbolt.Tx, id string) *bbolt.Bucket {
	return tx.Bucket(bucketRunData).Bucket([]byte(id))
}

// mustRunBucket returns the bucket of a run, or state.ErrNotFound.
func mustRunBucket(tx *bbolt.Tx, id string) (*bbolt.Bucket, error) {
	if rb := runBucket(tx, id); rb != nil {
		return rb, nil
	}
	return nil, fmt.Errorf("run %s: %w", id, state.ErrNotFound)
}

// GetRun returns a run or state.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*state.Run, error) {
	var r *state.Run
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		r, err = getRun(tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// ListRuns returns the runs matching f, newest first (by CreatedAt, then
// ID descending). It walks the creation index backwards and decodes only
// the runs that match. The runs listed of one playbook source share their
// Snapshot's bytes, which callers only read.
func (s *Store) ListRuns(ctx context.Context, f state.RunFilter) ([]*state.Run, error) {
	var out []*state.Run
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		snapshots, sources := map[string][]byte{}, sourcesOf(tx)
		runs := tx.Bucket(bucketRuns)
		c := tx.Bucket(bucketByCreated).Cursor()
		for k, v := listStart(c, f.Before); k != nil; k, v = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := decodeIndex(v)
			if err != nil {
				return err
			}
			if !matches(f, e) {
				continue
			}
			id := string(k[8:])
			data := runs.Get(k[8:])
			if data == nil {
				return fmt.Errorf("run %s is indexed but missing: %w", id, state.ErrCorrupt)
			}
			r, err := decodeRun(id, data, sources)
			if err != nil {
				return err
			}
			if k, _ := r.Trigger["key"].(string); f.TriggerKey != "" && k != f.TriggerKey {
				continue
			}
			r = withSnapshot(tx, r, snapshots)
			r.Trigger = state.BriefTrigger(r.Trigger) // see state.Store.ListRuns
			out = append(out, r)
			if f.Limit > 0 && len(out) >= f.Limit {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// listStart returns the newest entry of the by-created index that the
// listing from before holds: the last entry, or the one just before
// before's key (keys order as the listing does, oldest first).
func listStart(c *bbolt.Cursor, before *state.RunCursor) (k, v []byte) {
	if before == nil {
		return c.Last()
	}
	if k, _ := c.Seek(createdKey(before.CreatedAt, before.ID)); k == nil {
		return c.Last()
	}
	return c.Prev()
}

func matches(f state.RunFilter, e indexEntry) bool {
	if len(f.Status) > 0 && !slices.Contains(f.Status, e.Status) {
		return false
	}
	if f.Playbook != "" && f.Playbook != e.Playbook {
		return false
	}
	if f.ParentID != "" && f.ParentID != e.ParentID {
		return false
	}
	return true
}
