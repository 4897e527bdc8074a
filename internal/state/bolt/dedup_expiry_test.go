package bolt_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestDedupExpiresAtItsTTL(t *testing.T) {
	const ttl = time.Minute
	cases := []struct {
		name  string
		after time.Duration // since the key was recorded
		live  bool
	}{
		{"a key is live just before its TTL", ttl - time.Nanosecond, true},
		{"a key expires exactly at its TTL", ttl, false},
		{"a key is expired after its TTL", ttl + time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := statetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			s, _ := openTemp(t, bolt.Options{NoSync: true, Now: clock.Now})
			for _, k := range []string{"get", "claim"} {
				seen, err := s.Dedup(ctx, k, ttl)
				require.NoError(t, err)
				require.False(t, seen)
			}
			// Recorded for good, checked against a TTL: seen only when
			// recorded less than the TTL ago.
			_, err := s.Dedup(ctx, "recorded", 0)
			require.NoError(t, err)
			require.NoError(t, s.DedupSet(ctx, "get", []byte("v")))
			clock.Advance(c.after)

			_, err = s.DedupGet(ctx, "get")
			if c.live {
				assert.NoError(t, err, "DedupGet")
			} else {
				assert.ErrorIs(t, err, state.ErrNotFound, "DedupGet")
			}
			seen, err := s.Dedup(ctx, "claim", ttl)
			require.NoError(t, err)
			assert.Equal(t, c.live, seen, "Dedup reports the key seen")
			seen, err = s.Dedup(ctx, "recorded", ttl)
			require.NoError(t, err)
			assert.Equal(t, c.live, seen, "Dedup with a TTL reports a key recorded for good seen")
		})
	}
}

func TestDedupValueOfAnyLength(t *testing.T) {
	for _, n := range []int{0, 1, 17, 18, 1000} {
		t.Run(fmt.Sprintf("a value of %d bytes is kept", n), func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{NoSync: true})
			_, err := s.Dedup(ctx, "k", time.Hour)
			require.NoError(t, err)
			val := bytes.Repeat([]byte("v"), n)
			require.NoError(t, s.DedupSet(ctx, "k", val))
			require.NoError(t, s.Close())

			s, err = bolt.Open(path, bolt.Options{ReadOnly: true})
			require.NoError(t, err)
			defer s.Close()
			got, err := s.DedupGet(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, val, append([]byte{}, got...))
		})
	}
}

// dedupKeys lists the keys stored in the file's dedup bucket.
func dedupKeys(t *testing.T, path string) []string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var keys []string
	require.NoError(t, db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("dedup")).ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}))
	return keys
}

// A write prunes at most 64 expired keys, oldest expiry first, so that its
// cost stays small however many expired meanwhile.
func TestDedupPrunesABatchOfExpiredKeysPerWrite(t *testing.T) {
	cases := []struct {
		name    string
		expired int // keys recorded with a TTL that has passed
		exact   bool
		left    int // expired keys still stored after one more Dedup
	}{
		{"a few expired keys are all pruned", 3, false, 0},
		{"64 expired keys are all pruned", 64, false, 0},
		{"of 100 expired keys the 64 oldest are pruned", 100, false, 36},
		{"a key expiring exactly now is pruned", 1, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			clock := statetest.NewClock(start)
			s, path := openTemp(t, bolt.Options{NoSync: true, Now: clock.Now})
			for i := range c.expired {
				_, err := s.Dedup(ctx, fmt.Sprintf("old-%03d", i), time.Minute+time.Duration(i)*time.Millisecond)
				require.NoError(t, err)
			}
			_, err := s.Dedup(ctx, "forever", 0)
			require.NoError(t, err)
			if c.exact {
				clock.Advance(time.Minute) // the first key's expiry
			} else {
				clock.Advance(time.Hour)
			}
			_, err = s.Dedup(ctx, "new", time.Hour)
			require.NoError(t, err)
			require.NoError(t, s.Close())

			want := []string{"forever", "new"}
			for i := c.expired - c.left; i < c.expired; i++ {
				want = append(want, fmt.Sprintf("old-%03d", i))
			}
			assert.ElementsMatch(t, want, dedupKeys(t, path))
		})
	}
}

func TestDedupClaimedAgainKeepsItsNewExpiry(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := statetest.NewClock(start)
	s, _ := openTemp(t, bolt.Options{NoSync: true, Now: clock.Now})
	steps := []struct {
		at   time.Duration // since start
		ttl  time.Duration
		seen bool
	}{
		{0, 10 * time.Minute, false},               // recorded, expires at 10m
		{8 * time.Minute, 5 * time.Minute, false},  // older than 5m: recorded again at 8m, expires at 13m
		{11 * time.Minute, 5 * time.Minute, true},  // past the first expiry, within the second
		{14 * time.Minute, 5 * time.Minute, false}, // past the second
	}
	for _, st := range steps {
		clock.Advance(start.Add(st.at).Sub(clock.Now()))
		seen, err := s.Dedup(ctx, "k", st.ttl)
		require.NoError(t, err)
		assert.Equal(t, st.seen, seen, "Dedup at %v with TTL %v", st.at, st.ttl)
	}
}
