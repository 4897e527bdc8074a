package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// holdWriter occupies the store's writer until release is called, so that
// the writes queued meanwhile are committed together as one group.
func holdWriter(t *testing.T, s *bolt.Store) (release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- bolt.Update(ctx, s, func(*bbolt.Tx) error {
			select {
			case <-started:
			default:
				close(started)
			}
			<-unblock
			return nil
		})
	}()
	<-started
	return func() {
		close(unblock)
		must(t, <-errc)
	}
}

// waitQueued waits until n update functions wait for the writer.
func waitQueued(t *testing.T, s *bolt.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for bolt.Queued(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", bolt.Queued(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGroupCommit(t *testing.T) {
	t.Run("concurrent writers all land and a failing write loses only its own", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		must(t, s.CreateRun(ctx, &state.Run{ID: "taken", Playbook: "pb"}))
		release := holdWriter(t, s)
		const writers, each = 64, 50
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("w%02d-%02d", w, i)
					if i%2 == 0 {
						errs <- s.CreateRun(ctx, &state.Run{ID: id, Playbook: "pb"})
						continue
					}
					seen, err := s.Dedup(ctx, id, time.Hour)
					if err == nil && seen {
						err = fmt.Errorf("dedup %s: new key reported seen", id)
					}
					errs <- err
				}
			})
		}
		// The first write of every writer is queued behind the held
		// writer; the failing ones join the same group, last.
		waitQueued(t, s, writers)
		forced := errors.New("forced failure")
		failc := make(chan error, 2)
		go func() {
			failc <- bolt.Update(ctx, s, func(tx *bbolt.Tx) error {
				if err := tx.Bucket([]byte("cursors")).Put([]byte("poison"), []byte("x")); err != nil {
					return err
				}
				return forced
			})
		}()
		go func() { failc <- s.CreateRun(ctx, &state.Run{ID: "taken", Playbook: "pb"}) }()
		waitQueued(t, s, writers+2)
		release()
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
		for range 2 {
			err := <-failc
			if !errors.Is(err, forced) && !errors.Is(err, state.ErrExists) {
				t.Errorf("failing write: error = %v, want the forced failure or ErrExists", err)
			}
		}
		must(t, s.Close())

		s, err := bolt.Open(path, bolt.Options{})
		must(t, err)
		defer s.Close()
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		must(t, err)
		if len(runs) != writers*each/2+1 {
			t.Errorf("%d runs after reopen, want %d", len(runs), writers*each/2+1)
		}
		for w := range writers {
			for i := 1; i < each; i += 2 {
				if seen, err := s.Dedup(ctx, fmt.Sprintf("w%02d-%02d", w, i), time.Hour); err != nil || !seen {
					t.Fatalf("dedup key w%02d-%02d lost (seen %v, err %v)", w, i, seen, err)
				}
			}
		}
		if _, err := s.GetCursor(ctx, "poison"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("the failing write was kept: GetCursor error = %v", err)
		}
	})

	t.Run("a panic fails its group with ErrCorrupt and the writer goes on", func(t *testing.T) {
		s, _ := openTemp(t, bolt.Options{NoSync: true})
		release := holdWriter(t, s)
		errc := make(chan error, 2)
		go func() { errc <- s.PutCursor(ctx, "a", []byte("v")) }()
		waitQueued(t, s, 1)
		go func() {
			errc <- bolt.Update(ctx, s, func(*bbolt.Tx) error { panic("unexpected fault address") })
		}()
		waitQueued(t, s, 2)
		release()
		for range 2 {
			if err := <-errc; !errors.Is(err, state.ErrCorrupt) {
				t.Errorf("error = %v, want ErrCorrupt", err)
			}
		}
		if _, err := s.GetCursor(ctx, "a"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("a write of the failed group was kept: GetCursor error = %v", err)
		}
		must(t, s.PutCursor(ctx, "b", []byte("v")))
	})

	t.Run("a write whose context ends while queued never runs", func(t *testing.T) {
		s, _ := openTemp(t, bolt.Options{NoSync: true})
		release := holdWriter(t, s)
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- s.PutCursor(cctx, "k", []byte("v")) }()
		waitQueued(t, s, 1)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
		release()
		if _, err := s.GetCursor(ctx, "k"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("the abandoned write ran: GetCursor error = %v", err)
		}
	})

	t.Run("a lone write whose context has ended never runs", func(t *testing.T) {
		s, _ := openTemp(t, bolt.Options{NoSync: true})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ran := false
		err := bolt.Update(cctx, s, func(*bbolt.Tx) error { ran = true; return nil })
		if !errors.Is(err, context.Canceled) || ran {
			t.Errorf("error = %v, ran = %v; want context.Canceled, not run", err, ran)
		}
	})

	t.Run("Close commits the queued writes and later writes fail", func(t *testing.T) {
		s, path := openTemp(t, bolt.Options{})
		release := holdWriter(t, s)
		const n = 20
		errc := make(chan error, n)
		for i := range n {
			go func() { errc <- s.PutCursor(ctx, fmt.Sprint(i), []byte("v")) }()
		}
		waitQueued(t, s, n)
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		// Writers racing Close get an error or succeed; none hangs.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() { _ = s.PutCursor(ctx, fmt.Sprint("late", i), nil) })
		}
		release()
		must(t, <-closed)
		wg.Wait()
		for range n {
			must(t, <-errc)
		}
		if err := s.PutCursor(ctx, "after", nil); err == nil {
			t.Error("a write after Close succeeded")
		}
		s, err := bolt.Open(path, bolt.Options{ReadOnly: true})
		must(t, err)
		defer s.Close()
		for i := range n {
			if _, err := s.GetCursor(ctx, fmt.Sprint(i)); err != nil {
				t.Errorf("queued write %d lost: %v", i, err)
			}
		}
	})
}
