package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// pruneBatch bounds how many expired dedup keys one Dedup call deletes, so
// a call's cost stays small however many keys expired meanwhile.
const pruneBatch = 64

// GetCursor returns the value stored under key or state.ErrNotFound.
func (s *Store) GetCursor(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		k, v := tx.Bucket(bucketCursors).Cursor().Seek([]byte(key))
		if k == nil || !bytes.Equal(k, []byte(key)) {
			return state.ErrNotFound
		}
		out = append([]byte{}, v...) // v is only valid inside the transaction
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get cursor %s: %w", key, err)
	}
	return out, nil
}

// PutCursor stores val under key, replacing any previous value.
func (s *Store) PutCursor(ctx context.Context, key string, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCursors).Put([]byte(key), val)
	})
	if err != nil {
		return fmt.Errorf("put cursor %s: %w", key, err)
	}
	return nil
}

// Dedup records key and reports whether it was already recorded less than
// ttl ago (ttl 0: ever). The first-seen time of a key that is seen again is
// kept, so a key is forgotten ttl after it was first recorded. Expired keys
// are deleted a few at a time by later calls.
//
// A dedup entry is 16 bytes: first-seen and expiry (0: never) as big-endian
// unix nanoseconds, then, when DedupSet attached a value, the byte
// dedupHasValue and the value. dedup_expiry indexes entries by expiry for
// pruning.
func (s *Store) Dedup(ctx context.Context, key string, ttl time.Duration) (seen bool, err error) {
	now := s.now()
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		seen = false // the function may run again (see update)
		b := tx.Bucket(bucketDedup)
		exp := tx.Bucket(bucketDedupExp)
		if err := pruneDedup(b, exp, now); err != nil {
			return err
		}
		var err error
		seen, err = claim(b, exp, []byte(key), now, ttl)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("dedup %s: %w", key, err)
	}
	return seen, nil
}

// claim records dedup key k at now unless it is live (recorded less than
// ttl ago; ttl 0: ever), and reports whether it was.
func claim(b, exp *bbolt.Bucket, k []byte, now time.Time, ttl time.Duration) (seen bool, err error) {
	if v := b.Get(k); len(v) >= dedupHeader {
		if seenWithin(v, now, ttl) {
			return true, nil
		}
		if old := int64(binary.BigEndian.Uint64(v[8:])); old != 0 {
			if err := exp.Delete(expiryKey(old, k)); err != nil {
				return false, err
			}
		}
	}
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], uint64(now.UnixNano()))
	if ttl > 0 {
		at := now.Add(ttl).UnixNano()
		binary.BigEndian.PutUint64(v[8:], uint64(at))
		if err := exp.Put(expiryKey(at, k), nil); err != nil {
			return false, err
		}
	}
	return false, b.Put(k, v[:])
}

// seenWithin reports whether dedup entry v (nil: absent) was first
// recorded less than ttl before now (ttl 0: ever), as Dedup decides.
func seenWithin(v []byte, now time.Time, ttl time.Duration) bool {
	if len(v) < dedupHeader {
		return false
	}
	first := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	return ttl <= 0 || now.Sub(first) < ttl
}

// dedupHeader is the size of a dedup entry without a value; dedupHasValue
// follows it when a value does.
const (
	dedupHeader   = 16
	dedupHasValue = 1
)

// liveDedup reports whether entry v (nil: absent) is a key recorded and not
// expired at now.
func liveDedup(v []byte, now time.Time) bool {
	if len(v) < dedupHeader {
		return false
	}
	exp := int64(binary.BigEndian.Uint64(v[8:16]))
	return exp == 0 || now.UnixNano() < exp
}

// DedupGet returns the value DedupSet attached to key while key is live, or
// state.ErrNotFound when key is absent, expired or has no value.
func (s *Store) DedupGet(ctx context.Context, key string) ([]byte, error) {
	now := s.now()
	var out []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketDedup).Get([]byte(key))
		if !liveDedup(v, now) || len(v) <= dedupHeader || v[dedupHeader] != dedupHasValue {
			return state.ErrNotFound
		}
		out = append([]byte{}, v[dedupHeader+1:]...) // v is only valid inside the transaction
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedup get %s: %w", key, err)
	}
	return out, nil
}

// DedupSet attaches val to key, replacing any value, while key is live; it
// fails with state.ErrNotFound when key is absent or expired. The value is
// stored in key's entry, so it is deleted with it.
func (s *Store) DedupSet(ctx context.Context, key string, val []byte) error {
	now := s.now()
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketDedup)
		k := []byte(key)
		v := b.Get(k)
		if !liveDedup(v, now) {
			return state.ErrNotFound
		}
		entry := make([]byte, 0, dedupHeader+1+len(val))
		entry = append(entry, v[:dedupHeader]...)
		entry = append(entry, dedupHasValue)
		return b.Put(k, append(entry, val...))
	})
	if err != nil {
		return fmt.Errorf("dedup set %s: %w", key, err)
	}
	return nil
}

func expiryKey(at int64, key []byte) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, uint64(at)^(1<<63))
	return append(k, key...)
}

// pruneDedup deletes up to pruneBatch keys whose expiry has passed.
func pruneDedup(b, exp *bbolt.Bucket, now time.Time) error {
	limit := expiryKey(now.UnixNano(), nil)
	c := exp.Cursor()
	n := 0
	for k, _ := c.First(); k != nil && n < pruneBatch && bytes.Compare(k[:8], limit) <= 0; k, _ = c.First() {
		key := append([]byte{}, k[8:]...)
		if err := c.Delete(); err != nil {
			return err
		}
		if err := b.Delete(key); err != nil {
			return err
		}
		n++
	}
	return nil
}
