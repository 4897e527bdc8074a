package bolt_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestDedupValues(t *testing.T) {
	t.Run("a key written before values existed is live and takes a value", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		must(t, s.Close())
		// The 16-byte entry of earlier builds: first-seen, expiry (never).
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
		must(t, err)
		var entry [16]byte
		binary.BigEndian.PutUint64(entry[:8], uint64(time.Now().UnixNano()))
		must(t, db.Update(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte("dedup")).Put([]byte("old"), entry[:])
		}))
		must(t, db.Close())

		s, err = bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		if seen, err := s.Dedup(ctx, "old", 0); err != nil || !seen {
			t.Fatalf("old key: seen %v, err %v; want seen", seen, err)
		}
		if _, err := s.DedupGet(ctx, "old"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("old key without a value: error = %v, want ErrNotFound", err)
		}
		must(t, s.DedupSet(ctx, "old", []byte("v")))
		got, err := s.DedupGet(ctx, "old")
		must(t, err)
		if string(got) != "v" {
			t.Errorf("value = %q, want v", got)
		}
		if seen, err := s.Dedup(ctx, "old", 0); err != nil || !seen {
			t.Errorf("old key with a value: seen %v, err %v; want seen", seen, err)
		}
	})

	t.Run("pruning an expired key deletes its value from the file", func(t *testing.T) {
		clock := statetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		s, path := openTemp(t, bolt.Options{Now: clock.Now})
		_, err := s.Dedup(ctx, "k", time.Minute)
		must(t, err)
		must(t, s.DedupSet(ctx, "k", []byte("value")))
		clock.Advance(2 * time.Minute)
		_, err = s.Dedup(ctx, "other", time.Minute) // prunes k
		must(t, err)
		must(t, s.Close())
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
		must(t, err)
		defer db.Close()
		must(t, db.View(func(tx *bbolt.Tx) error {
			if v := tx.Bucket([]byte("dedup")).Get([]byte("k")); v != nil {
				t.Errorf("expired entry still stored: %q", v)
			}
			return nil
		}))
	})
}
