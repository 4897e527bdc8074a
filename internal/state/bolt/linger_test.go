package bolt_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state/bolt"
)

// lingerEnv is a store whose writer lingers an hour (not a millisecond)
// after a commit of several writes, so whether it lingers is visible.
type lingerEnv struct {
	t *testing.T
	s *bolt.Store
}

func newLingerEnv(t *testing.T) *lingerEnv {
	t.Helper()
	s, err := bolt.NewLingering(filepath.Join(t.TempDir(), "state.db"), time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &lingerEnv{t: t, s: s}
}

// write queues one update in the background; its channel yields the ID of
// the transaction it committed in.
func (e *lingerEnv) write() <-chan int {
	out := make(chan int, 1)
	go func() {
		var id int
		err := bolt.Update(context.Background(), e.s, func(tx *bbolt.Tx) error {
			id = tx.ID()
			_, err := tx.CreateBucketIfNotExists([]byte("linger-test"))
			return err
		})
		if err != nil {
			id = -1
		}
		out <- id
	}()
	return out
}

func (e *lingerEnv) await(c <-chan int) int {
	e.t.Helper()
	select {
	case id := <-c:
		require.NotEqual(e.t, -1, id)
		return id
	case <-time.After(5 * time.Second):
		e.t.Fatal("a write waited for the writer's linger")
		return 0
	}
}

// group commits n writes together: the writer is held by a blocking
// write while the n queue, then released.
func (e *lingerEnv) group(n int) {
	e.t.Helper()
	release, held := make(chan struct{}), make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- bolt.Update(context.Background(), e.s, func(*bbolt.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	var writes []<-chan int
	for range n {
		writes = append(writes, e.write())
	}
	require.Eventually(e.t, func() bool { return bolt.Queued(e.s) == n }, 5*time.Second, time.Millisecond)
	close(release)
	require.NoError(e.t, <-blocker)
	ids := map[int]bool{}
	for _, w := range writes {
		ids[e.await(w)] = true
	}
	require.Len(e.t, ids, 1, "the %d writes queued together commit in one transaction", n)
}

// TestAWriterAfterASmallGroupNeverLingers: after a group of fewer than
// four writes, a lone write commits at once (the writer does not wait
// for others to join it).
func TestAWriterAfterASmallGroupNeverLingers(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		e := newLingerEnv(t)
		e.group(n)
		e.await(e.write())
	}
}

// TestAfterAGroupOfFourTheWriterWaitsForAsManyToQueue: after a commit of
// four writes, the next writes, arriving one by one, are gathered into
// one commit of four (the writer lingers until as many are queued).
func TestAfterAGroupOfFourTheWriterWaitsForAsManyToQueue(t *testing.T) {
	e := newLingerEnv(t)
	e.group(4)
	var writes []<-chan int
	var mu sync.Mutex
	for range 4 {
		mu.Lock()
		writes = append(writes, e.write())
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // they arrive one at a time
	}
	ids := map[int]bool{}
	for _, w := range writes {
		ids[e.await(w)] = true
	}
	assert.Len(t, ids, 1, "the four trickling writes commit together")
}

// TestClosingEndsALinger: a writer lingering for writes that never come
// lets Close finish and answers what was queued.
func TestClosingEndsALinger(t *testing.T) {
	e := newLingerEnv(t)
	e.group(4)
	w := e.write()
	require.Eventually(t, func() bool { return bolt.Queued(e.s) == 1 }, 5*time.Second, time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- e.s.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the linger")
	}
	e.await(w)
}
