package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// queueWrites queues a PutCursor of each key while the writer is held, so
// that they are committed in as few groups as can be, then releases it and
// returns each write's error by key. The write at index fail (none when
// negative) puts its key and then fails: it must get its own error. Each
// write gets a context that ends after a while, so a write the writer
// never answers fails instead of hanging.
func queueWrites(t *testing.T, s *bolt.Store, keys []string, fail int) map[string]error {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	release := holdWriter(t, s)
	forced := errors.New("forced failure")
	type result struct {
		key string
		err error
	}
	results := make(chan result, len(keys))
	for i, k := range keys {
		if i == fail {
			go func() {
				results <- result{k, bolt.Update(wctx, s, func(tx *bbolt.Tx) error {
					if err := tx.Bucket([]byte("cursors")).Put([]byte(k), []byte("x")); err != nil {
						return err
					}
					return forced
				})}
			}()
		} else {
			go func() { results <- result{k, s.PutCursor(wctx, k, []byte("v-"+k))} }()
		}
		if i <= fail {
			waitQueued(t, s, i+1) // so the failing write has its place in the group
		}
	}
	waitQueued(t, s, len(keys))
	release()
	errs := map[string]error{}
	for range keys {
		r := <-results
		errs[r.key] = r.err
	}
	if fail >= 0 {
		require.ErrorIs(t, errs[keys[fail]], forced, "the failing write gets its own error")
		delete(errs, keys[fail])
	}
	return errs
}

func TestGroupCommitAnswersEveryWrite(t *testing.T) {
	cases := []struct {
		name   string
		writes int
		fail   int // index of the write that fails; -1: none
	}{
		{"writes queued beyond one group all land", 300, -1},
		{"a failing write first in its group loses only its own", 6, 0},
		{"a failing write in the middle of its group loses only its own", 6, 3},
		{"a failing write last in its group loses only its own", 6, 5},
		{"a lone failing write is answered with its error", 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{})
			keys := make([]string, c.writes)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%03d", i)
			}
			errs := queueWrites(t, s, keys, c.fail)
			for k, err := range errs {
				assert.NoError(t, err, "write %s", k)
			}
			require.NoError(t, s.Close())

			s, err := bolt.Open(path, bolt.Options{ReadOnly: true})
			require.NoError(t, err)
			defer s.Close()
			for i, k := range keys {
				v, err := s.GetCursor(ctx, k)
				if i == c.fail {
					assert.ErrorIs(t, err, state.ErrNotFound, "the failing write was rolled back")
					continue
				}
				if assert.NoError(t, err, "write %s lost", k) {
					assert.Equal(t, "v-"+k, string(v))
				}
			}
		})
	}
}
