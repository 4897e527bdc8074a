package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// written is the outcome of one queued write.
type written struct {
	err error
	tx  int // the transaction that committed it
}

// queueWrites queues a cursor write of each key while the writer is held,
// so that they are committed in as few groups as can be, then releases it
// and returns each write's outcome by key. The write at index fail (none
// when negative) puts its key and then fails: it must get its own error.
// Each write gets a context that ends after a while, so a write the writer
// never answers fails instead of hanging.
func queueWrites(t *testing.T, s *bolt.Store, keys []string, fail int) map[string]written {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	release := holdWriter(t, s)
	forced := errors.New("forced failure")
	type result struct {
		key string
		written
	}
	results := make(chan result, len(keys))
	for i, k := range keys {
		go func() {
			var r result
			r.key = k
			r.err = bolt.Update(wctx, s, func(tx *bbolt.Tx) error {
				r.tx = tx.ID() // the last run is the one that counts
				if err := tx.Bucket([]byte("cursors")).Put([]byte(k), []byte("v-"+k)); err != nil {
					return err
				}
				if i == fail {
					return forced
				}
				return nil
			})
			results <- r
		}()
		if i <= fail {
			waitQueued(t, s, i+1) // so the failing write has its place in the group
		}
	}
	waitQueued(t, s, len(keys))
	release()
	out := map[string]written{}
	for range keys {
		r := <-results
		out[r.key] = r.written
	}
	if fail >= 0 {
		require.ErrorIs(t, out[keys[fail]].err, forced, "the failing write gets its own error")
		delete(out, keys[fail])
	}
	return out
}

func TestGroupCommitAnswersEveryWrite(t *testing.T) {
	cases := []struct {
		name   string
		writes int
		fail   int   // index of the write that fails; -1: none
		groups []int // the sizes of the transactions that committed the others
	}{
		{"writes queued beyond one group of 256 all land, in a second group", 300, -1, []int{256, 44}},
		{"a failing write first in its group loses only its own", 6, 0, []int{5}},
		{"a failing write in the middle of its group loses only its own", 6, 3, []int{5}},
		{"a failing write last in its group loses only its own", 6, 5, []int{5}},
		{"a lone failing write is answered with its error", 1, 0, []int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{})
			keys := make([]string, c.writes)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%03d", i)
			}
			out := queueWrites(t, s, keys, c.fail)
			byTx := map[int]int{}
			for k, w := range out {
				assert.NoError(t, w.err, "write %s", k)
				byTx[w.tx]++
			}
			groups := slices.Sorted(maps.Values(byTx))
			slices.Reverse(groups)
			assert.Equal(t, c.groups, append([]int{}, groups...), "writes per transaction")
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

func TestAFailedWriteLeavesTheFileAsItWas(t *testing.T) {
	cases := []struct {
		name string
		fn   func(tx *bbolt.Tx) error
	}{
		{"a write whose function fails", func(tx *bbolt.Tx) error {
			if err := tx.Bucket([]byte("cursors")).Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			return errors.New("forced failure")
		}},
		{"a run created twice", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{})
			require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}))
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			if c.fn != nil {
				require.Error(t, bolt.Update(ctx, s, c.fn))
			} else {
				require.ErrorIs(t, s.CreateRun(ctx, &state.Run{ID: "r1", Playbook: "pb"}), state.ErrExists)
			}
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(before, after), "the file changed")
		})
	}
}
