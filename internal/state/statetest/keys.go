package statetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

func testRecords(t *testing.T, open opener) {
	t.Run("an intent reads back and can be resolved", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		in := state.Intent{RunID: "r1", Step: "create", Attempt: 1, Key: "idem-1", CreatedAt: at(time.Second), Data: []byte(`{"name":"c1"}`)}
		ok(t, s.PutIntent(ctx, in))
		got, err := s.GetIntent(ctx, "r1", "create")
		ok(t, err)
		same(t, *got, in)

		in.Resolved = true
		in.Attempt = 2
		ok(t, s.PutIntent(ctx, in))
		got, err = s.GetIntent(ctx, "r1", "create")
		ok(t, err)
		same(t, *got, in)
	})

	t.Run("an approval reads back with its fields", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		a := state.Approval{RunID: "r1", Step: "gate", Approved: true, By: "kim", Comment: "go", Fields: map[string]any{"window": "night"}, At: at(time.Minute)}
		ok(t, PutApproval(ctx, s, a))
		got, err := s.GetApproval(ctx, "r1", "gate")
		ok(t, err)
		same(t, *got, a)
	})

	t.Run("intents and approvals are per run and step", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		create(t, s, newRun("r2", "pb", at(1)))
		ok(t, s.PutIntent(ctx, state.Intent{RunID: "r1", Step: "a", Key: "k"}))
		ok(t, PutApproval(ctx, s, state.Approval{RunID: "r1", Step: "a"}))
		_, err := s.GetIntent(ctx, "r2", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetIntent(ctx, "r1", "b")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetApproval(ctx, "r2", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetApproval(ctx, "r1", "b")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("intents and approvals of a run never created are ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		errIs(t, s.PutIntent(ctx, state.Intent{RunID: "ghost", Step: "a"}), state.ErrNotFound)
		errIs(t, PutApproval(ctx, s, state.Approval{RunID: "ghost", Step: "a"}), state.ErrNotFound)
		_, err := s.GetIntent(ctx, "ghost", "a")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetApproval(ctx, "ghost", "a")
		errIs(t, err, state.ErrNotFound)
	})
}

func testLocks(t *testing.T, open opener) {
	lock := func(key, owner string) state.Lock {
		return state.Lock{Key: key, Owner: owner, Process: "host:1", Since: at(time.Second)}
	}
	acquire := func(t *testing.T, s state.Store, l state.Lock) (bool, *state.Lock) {
		t.Helper()
		got, holder, err := s.AcquireLock(ctx, l)
		ok(t, err)
		return got, holder
	}

	t.Run("a free key is taken", func(t *testing.T) {
		s, _ := open(t)
		got, holder := acquire(t, s, lock("k", "r1"))
		same(t, got, true)
		if holder != nil {
			t.Errorf("holder = %+v, want none", holder)
		}
		locks, err := s.Locks(ctx)
		ok(t, err)
		same(t, locks, []state.Lock{lock("k", "r1")})
	})

	t.Run("the owner takes its own key again", func(t *testing.T) {
		s, _ := open(t)
		acquire(t, s, lock("k", "r1"))
		got, _ := acquire(t, s, lock("k", "r1"))
		same(t, got, true)
	})

	t.Run("a held key is refused and names its holder", func(t *testing.T) {
		s, _ := open(t)
		acquire(t, s, lock("k", "r1"))
		got, holder := acquire(t, s, lock("k", "r2"))
		same(t, got, false)
		if holder == nil {
			t.Fatal("no holder returned")
		}
		same(t, *holder, lock("k", "r1"))
	})

	t.Run("a key held by a run that ended is taken; one held by a cancelled or unfinished run is not", func(t *testing.T) {
		s, _ := open(t)
		for i, st := range []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunSkipped, state.RunCancelled, state.RunRunning, state.RunWaiting} {
			holderID, key := fmt.Sprintf("holder-%d", i), fmt.Sprintf("k%d", i)
			r := newRun(holderID, "pb", at(time.Duration(i)))
			create(t, s, r)
			got, _ := acquire(t, s, lock(key, holderID))
			same(t, got, true)
			r.Status = st
			ok(t, s.SaveRun(ctx, r))
			got, holder := acquire(t, s, lock(key, "next-"+holderID))
			if got != st.KeyFreed() {
				t.Errorf("key held by a %s run: taken %v, want %v", st, got, st.KeyFreed())
			}
			if !got && (holder == nil || holder.Owner != holderID) {
				t.Errorf("key held by a %s run: holder %+v, want %s", st, holder, holderID)
			}
			if got {
				locks, err := s.Locks(ctx)
				ok(t, err)
				for _, l := range locks {
					if l.Key == key && l.Owner != "next-"+holderID {
						t.Errorf("key %s still names %s after it was taken", key, l.Owner)
					}
				}
			}
		}
	})

	t.Run("the owner releases and another run takes the key", func(t *testing.T) {
		s, _ := open(t)
		acquire(t, s, lock("k", "r1"))
		ok(t, s.ReleaseLock(ctx, "k", "r1"))
		got, _ := acquire(t, s, lock("k", "r2"))
		same(t, got, true)
	})

	t.Run("another run cannot release a held key", func(t *testing.T) {
		s, _ := open(t)
		acquire(t, s, lock("k", "r1"))
		if err := s.ReleaseLock(ctx, "k", "r2"); !errors.Is(err, state.ErrHeldByAnother) {
			t.Errorf("release by a non-owner: %v, want ErrHeldByAnother", err)
		}
		got, _ := acquire(t, s, lock("k", "r3"))
		same(t, got, false)
	})

	t.Run("releasing a free key is not an error", func(t *testing.T) {
		s, _ := open(t)
		ok(t, s.ReleaseLock(ctx, "never", "r1"))
	})

	t.Run("locks list by key", func(t *testing.T) {
		s, _ := open(t)
		for _, k := range []string{"nks/b", "nks/a", "digest"} {
			acquire(t, s, lock(k, "r-"+k))
		}
		locks, err := s.Locks(ctx)
		ok(t, err)
		same(t, locks, []state.Lock{lock("digest", "r-digest"), lock("nks/a", "r-nks/a"), lock("nks/b", "r-nks/b")})
	})

	t.Run("a store without locks lists none", func(t *testing.T) {
		s, _ := open(t)
		locks, err := s.Locks(ctx)
		ok(t, err)
		if len(locks) != 0 {
			t.Fatalf("locks = %+v", locks)
		}
	})
}

func testCursors(t *testing.T, open opener) {
	t.Run("an unknown cursor is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.GetCursor(ctx, "nope")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a cursor round-trips and is replaced", func(t *testing.T) {
		s, _ := open(t)
		ok(t, s.PutCursor(ctx, "notice/kr1", []byte("2029-06-01T00:00:00Z")))
		ok(t, s.PutCursor(ctx, "notice/kr2", []byte("other")))
		ok(t, s.PutCursor(ctx, "notice/kr1", []byte("2029-06-02T00:00:00Z")))
		got, err := s.GetCursor(ctx, "notice/kr1")
		ok(t, err)
		same(t, string(got), "2029-06-02T00:00:00Z")
	})

	t.Run("an empty cursor value is stored, not missing", func(t *testing.T) {
		s, _ := open(t)
		ok(t, s.PutCursor(ctx, "k", []byte{}))
		got, err := s.GetCursor(ctx, "k")
		ok(t, err)
		same(t, len(got), 0)
	})

	t.Run("a returned cursor is the caller's to keep", func(t *testing.T) {
		s, _ := open(t)
		ok(t, s.PutCursor(ctx, "k", []byte("abc")))
		got, err := s.GetCursor(ctx, "k")
		ok(t, err)
		got[0] = 'X'
		again, err := s.GetCursor(ctx, "k")
		ok(t, err)
		same(t, string(again), "abc")
	})
}

func testDedup(t *testing.T, open opener) {
	t.Run("a key is new once and seen after", func(t *testing.T) {
		s, _ := open(t)
		for i, want := range []bool{false, true, true} {
			seen, err := s.Dedup(ctx, "hook-1", time.Hour)
			ok(t, err)
			if seen != want {
				t.Fatalf("call %d: seen = %v, want %v", i+1, seen, want)
			}
		}
		seen, err := s.Dedup(ctx, "hook-2", time.Hour)
		ok(t, err)
		same(t, seen, false)
	})

	t.Run("a key is forgotten after its ttl", func(t *testing.T) {
		s, clock := open(t)
		ttl := 50 * time.Millisecond
		seen, err := s.Dedup(ctx, "k", ttl)
		ok(t, err)
		same(t, seen, false)
		seen, err = s.Dedup(ctx, "k", ttl)
		ok(t, err)
		same(t, seen, true)
		if clock != nil {
			clock.Advance(ttl + time.Millisecond)
		} else {
			time.Sleep(ttl + 10*time.Millisecond) // the suite's one sleep
		}
		seen, err = s.Dedup(ctx, "k", ttl)
		ok(t, err)
		same(t, seen, false)
		seen, err = s.Dedup(ctx, "k", ttl)
		ok(t, err)
		same(t, seen, true)
	})

	t.Run("a key with no ttl is kept for good", func(t *testing.T) {
		s, clock := open(t)
		seen, err := s.Dedup(ctx, "k", 0)
		ok(t, err)
		same(t, seen, false)
		if clock != nil {
			clock.Advance(24 * 365 * time.Hour)
		}
		seen, err = s.Dedup(ctx, "k", 0)
		ok(t, err)
		same(t, seen, true)
	})

	t.Run("expiry of one key leaves others", func(t *testing.T) {
		s, clock := open(t)
		if clock == nil {
			t.Skip("needs a clock the suite controls")
		}
		_, err := s.Dedup(ctx, "short", time.Minute)
		ok(t, err)
		_, err = s.Dedup(ctx, "long", time.Hour)
		ok(t, err)
		clock.Advance(2 * time.Minute)
		seen, err := s.Dedup(ctx, "long", time.Hour)
		ok(t, err)
		same(t, seen, true)
		seen, err = s.Dedup(ctx, "short", time.Minute)
		ok(t, err)
		same(t, seen, false)
	})
}

func testDedupValues(t *testing.T, open opener) {
	t.Run("a value attached to a key reads back and is replaced", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.Dedup(ctx, "k", time.Hour)
		ok(t, err)
		_, err = s.DedupGet(ctx, "k")
		errIs(t, err, state.ErrNotFound)
		ok(t, s.DedupSet(ctx, "k", []byte(`{"runs":["r1"]}`)))
		got, err := s.DedupGet(ctx, "k")
		ok(t, err)
		same(t, string(got), `{"runs":["r1"]}`)
		ok(t, s.DedupSet(ctx, "k", []byte("v2")))
		seen, err := s.Dedup(ctx, "k", time.Hour)
		ok(t, err)
		same(t, seen, true)
		got, err = s.DedupGet(ctx, "k")
		ok(t, err)
		same(t, string(got), "v2")
	})

	t.Run("an unknown key has no value and takes none", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.DedupGet(ctx, "nope")
		errIs(t, err, state.ErrNotFound)
		errIs(t, s.DedupSet(ctx, "nope", []byte("v")), state.ErrNotFound)
		seen, err := s.Dedup(ctx, "nope", time.Hour)
		ok(t, err)
		same(t, seen, false)
	})

	t.Run("an empty value is stored, not missing", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.Dedup(ctx, "k", 0)
		ok(t, err)
		ok(t, s.DedupSet(ctx, "k", nil))
		got, err := s.DedupGet(ctx, "k")
		ok(t, err)
		same(t, len(got), 0)
	})

	t.Run("a returned value is the caller's to keep", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.Dedup(ctx, "k", time.Hour)
		ok(t, err)
		ok(t, s.DedupSet(ctx, "k", []byte("abc")))
		got, err := s.DedupGet(ctx, "k")
		ok(t, err)
		got[0] = 'X'
		again, err := s.DedupGet(ctx, "k")
		ok(t, err)
		same(t, string(again), "abc")
	})

	t.Run("a value expires with its key", func(t *testing.T) {
		s, clock := open(t)
		if clock == nil {
			t.Skip("needs a clock the suite controls")
		}
		_, err := s.Dedup(ctx, "k", time.Minute)
		ok(t, err)
		ok(t, s.DedupSet(ctx, "k", []byte("v")))
		_, err = s.Dedup(ctx, "other", time.Hour)
		ok(t, err)
		ok(t, s.DedupSet(ctx, "other", []byte("kept")))
		clock.Advance(2 * time.Minute)
		_, err = s.DedupGet(ctx, "k")
		errIs(t, err, state.ErrNotFound)
		errIs(t, s.DedupSet(ctx, "k", []byte("late")), state.ErrNotFound)
		seen, err := s.Dedup(ctx, "k", time.Minute)
		ok(t, err)
		same(t, seen, false)
		_, err = s.DedupGet(ctx, "k")
		errIs(t, err, state.ErrNotFound) // recorded anew, without the old value
		got, err := s.DedupGet(ctx, "other")
		ok(t, err)
		same(t, string(got), "kept")
	})
}

func testCancelled(t *testing.T, open opener) {
	s, _ := open(t)
	create(t, s, newRun("r1", "pb", at(0)))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateRun", func() error { return s.CreateRun(cctx, newRun("r2", "pb", at(0))) }},
		{"SaveRun", func() error { return s.SaveRun(cctx, newRun("r1", "pb", at(0))) }},
		{"GetRun", func() error { _, err := s.GetRun(cctx, "r1"); return err }},
		{"ListRuns", func() error { _, err := s.ListRuns(cctx, state.RunFilter{}); return err }},
		{"SaveStep", func() error { return s.SaveStep(cctx, &state.StepRecord{RunID: "r1", ID: "a"}) }},
		{"AppendEvents", func() error { return s.AppendEvents(cctx, "r1", state.Event{Type: "x"}) }},
		{"Events", func() error { _, err := s.Events(cctx, "r1", 0, 0); return err }},
		{"PutCursor", func() error { return s.PutCursor(cctx, "k", []byte("v")) }},
		{"Dedup", func() error { _, err := s.Dedup(cctx, "k", 0); return err }},
		{"DedupGet", func() error { _, err := s.DedupGet(cctx, "k"); return err }},
		{"DedupSet", func() error { return s.DedupSet(cctx, "k", []byte("v")) }},
		{"AcquireLock", func() error { _, _, err := s.AcquireLock(cctx, state.Lock{Key: "k", Owner: "r1"}); return err }},
	}
	for _, c := range calls {
		t.Run(c.name+" refuses a cancelled context", func(t *testing.T) {
			if err := c.call(); !errors.Is(err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", err)
			}
		})
	}
	t.Run("nothing was written through a cancelled context", func(t *testing.T) {
		_, err := s.GetRun(ctx, "r2")
		errIs(t, err, state.ErrNotFound)
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, len(evs), 0)
		_, err = s.GetCursor(ctx, "k")
		errIs(t, err, state.ErrNotFound)
	})
}

func testConcurrent(t *testing.T, open opener) {
	t.Run("concurrent step saves get distinct sequence numbers", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		const writers, each = 4, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("w%d-%d", w, i)
					errs <- s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: id, Status: state.StepSucceeded},
						state.Event{Type: "step.succeeded", Step: id, Time: at(0)})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			ok(t, err)
		}
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		want := make([]uint64, writers*each)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		same(t, seqs(evs), want)
		steps, err := s.Steps(ctx, "r1")
		ok(t, err)
		same(t, len(steps), writers*each)
	})
}
