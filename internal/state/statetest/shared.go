package statetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// RunShared runs the shared-store contract: what two Store values over one
// database (two replicas of runbook serve, or serve and a `runbook run`)
// must see of each other. open returns two stores on the same fresh,
// empty database, one per test. Each store writes while the other does:
// each sees the other's writes, event numbers stay unique and without
// gaps, and every claim (a run ID, a dedup key, a delivery's hooks, a
// lock) is taken once. A store that one process holds exclusively (bbolt)
// has no such contract.
func RunShared(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	t.Helper()
	t.Run("each sees the other's writes", func(t *testing.T) { testSharedWrites(t, open) })
	t.Run("events written by both at once are numbered once, without gaps", func(t *testing.T) { testSharedEvents(t, open) })
	t.Run("claims are taken once", func(t *testing.T) { testSharedClaims(t, open) })
	t.Run("deliveries racing on both start each hook's run once", func(t *testing.T) { testSharedDeliveries(t, open) })
	t.Run("answers to one approval given on both at once are each counted or refused", func(t *testing.T) { testSharedAnswers(t, open) })
	t.Run("a cancellation is not overwritten by a write that did not see it", func(t *testing.T) { testSharedCancel(t, open) })
	t.Run("a cancellation is not recorded over an end it did not see", func(t *testing.T) { testSharedCancelAfterEnd(t, open) })
}

// testSharedCancelAfterEnd has b read a running run, a end it (each way a
// run ends otherwise), then b record it cancelled from what it read: the
// cancellation is refused with an *EndedMeanwhileError naming the end,
// and nothing of it is written. A cancellation written by one who saw
// the end (its record carries the end time) is not refused.
func testSharedCancelAfterEnd(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	// Times a second apart: PostgreSQL keeps microseconds.
	for i, end := range []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunSkipped} {
		id := "r" + string(end)
		r := newRun(id, "pb", at(0))
		r.Status, r.StartedAt = state.RunRunning, at(time.Second)
		create(t, a, r)
		read, err := b.GetRun(ctx, id)
		ok(t, err)

		r.Status, r.EndedAt = end, at(2*time.Second)
		ok(t, a.SaveRun(ctx, r, state.Event{Type: "run." + string(end), Time: at(2 * time.Second)}))

		read.Status, read.EndedAt = state.RunCancelled, at(3*time.Second)
		err = b.SaveRun(ctx, read, state.Event{Type: "run.cancelled", Time: at(3 * time.Second)})
		var ended *state.EndedMeanwhileError
		if !errors.As(err, &ended) || !errors.Is(err, state.ErrEndedMeanwhile) {
			t.Fatalf("%d: cancellation of a run that ended %s meanwhile: %v, want an EndedMeanwhileError", i, end, err)
		}
		same(t, ended.Run, id)
		same(t, ended.Status, end)
		got, err := a.GetRun(ctx, id)
		ok(t, err)
		same(t, got.Status, end)
		evs, err := a.Events(ctx, id, 0, 0)
		ok(t, err)
		same(t, len(evs), 1)
	}
	// One who saw the end may still write what it likes over it.
	got, err := b.GetRun(ctx, "rfailed")
	ok(t, err)
	got.Status = state.RunCancelled
	ok(t, b.SaveRun(ctx, got))
}

// testSharedCancel has a run executing through store a while b records it
// cancelled: a's next write, of a record read before the cancel, is
// refused with ErrCancelledMeanwhile (nothing of it is written), while a
// write saying cancelled, and one that carries the cancellation (a
// cancelled run resumed on purpose), are not.
func testSharedCancel(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	r := newRun("r1", "pb", at(0))
	r.Status, r.StartedAt = state.RunRunning, at(1)
	create(t, a, r)

	cancelled, err := b.GetRun(ctx, "r1")
	ok(t, err)
	cancelled.Status, cancelled.EndedAt = state.RunCancelled, at(2)
	cancelled.Error = &state.ErrorRecord{Code: "cancelled", Message: "run cancelled by bob"}
	ok(t, b.SaveRun(ctx, cancelled, state.Event{Type: "run.cancelled", Time: at(2)}))

	for _, st := range []state.RunStatus{state.RunRunning, state.RunWaiting, state.RunSucceeded} {
		r.Status = st
		err := a.SaveRunSteps(ctx, r, []*state.StepRecord{{RunID: "r1", ID: "s1", Status: state.StepSucceeded}},
			state.Event{Type: "run." + string(st), Time: at(3)})
		if !errors.Is(err, state.ErrCancelledMeanwhile) {
			t.Fatalf("write of a run %s over a cancellation it did not see: %v, want ErrCancelledMeanwhile", st, err)
		}
	}
	got, err := a.GetRun(ctx, "r1")
	ok(t, err)
	same(t, got.Status, state.RunCancelled)
	same(t, got.Error.Message, "run cancelled by bob")
	evs, err := a.Events(ctx, "r1", 0, 0)
	ok(t, err)
	same(t, len(evs), 1)

	// Saying cancelled is never refused; a write carrying the
	// cancellation's end (a resume of the cancelled run) is not either.
	r.Status, r.EndedAt = state.RunCancelled, at(4)
	ok(t, a.SaveRun(ctx, r))
	got, err = b.GetRun(ctx, "r1")
	ok(t, err)
	got.Status = state.RunRunning
	ok(t, b.SaveRun(ctx, got, state.Event{Type: "run.resumed", Time: at(5)}))
	got, err = a.GetRun(ctx, "r1")
	ok(t, err)
	same(t, got.Status, state.RunRunning)
	// An unknown run is still not found.
	if err := a.SaveRun(ctx, newRun("nope", "pb", at(0))); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("save of an unknown run: %v, want ErrNotFound", err)
	}
}

func testSharedWrites(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	r := newRun("r1", "pb", at(0))
	create(t, a, r, state.Event{Type: "run.created", Time: at(0)})
	got, err := b.GetRun(ctx, "r1")
	ok(t, err)
	same(t, got.Playbook, "pb")

	got.Status = state.RunRunning
	ok(t, b.SaveRun(ctx, got, state.Event{Type: "run.started", Time: at(1)}))
	ok(t, a.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: "s1", Status: state.StepSucceeded, Attempts: 1},
		state.Event{Type: "step.succeeded", Step: "s1", Time: at(2)}))
	ok(t, b.PutIntent(ctx, state.Intent{RunID: "r1", Step: "s1", Attempt: 1, Key: "k1", CreatedAt: at(2)}))
	ok(t, PutApproval(ctx, a, state.Approval{RunID: "r1", Step: "gate", Approved: true, By: "ann", At: at(3)}))
	ok(t, b.PutCursor(ctx, "c1", []byte("v1")))

	for name, s := range map[string]state.Store{"a": a, "b": b} {
		t.Run("store "+name, func(t *testing.T) {
			got, err := s.GetRun(ctx, "r1")
			ok(t, err)
			same(t, got.Status, state.RunRunning)
			steps, err := s.Steps(ctx, "r1")
			ok(t, err)
			same(t, len(steps), 1)
			evs, err := s.Events(ctx, "r1", 0, 0)
			ok(t, err)
			same(t, seqs(evs), []uint64{1, 2, 3})
			in, err := s.GetIntent(ctx, "r1", "s1")
			ok(t, err)
			same(t, in.Key, "k1")
			ap, err := s.GetApproval(ctx, "r1", "gate")
			ok(t, err)
			same(t, ap.By, "ann")
			c, err := s.GetCursor(ctx, "c1")
			ok(t, err)
			same(t, string(c), "v1")
			runs, err := s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunRunning}})
			ok(t, err)
			same(t, runIDs(runs), []string{"r1"})
		})
	}
}

// testSharedEvents has both stores append events to one run at once, by
// every call that appends them, and checks that the numbers run from 1
// without gaps or repeats and that each call's events are consecutive.
func testSharedEvents(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	create(t, a, newRun("r1", "pb", at(0)))
	const writers, calls = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for i, s := range []state.Store{a, b, a, b, a, b, a, b} {
		wg.Go(func() {
			for c := range calls {
				n := 1 + c%3 // 1 to 3 events per call
				evs := make([]state.Event, n)
				for k := range evs {
					evs[k] = state.Event{Type: "log", Message: fmt.Sprintf("w%d-c%d-%d/%d", i, c, k, n), Time: at(0)}
				}
				var err error
				switch c % 3 {
				case 0:
					err = s.AppendEvents(ctx, "r1", evs...)
				case 1:
					err = s.SaveStep(ctx, &state.StepRecord{RunID: "r1", ID: fmt.Sprintf("w%d", i), Status: state.StepRunning}, evs...)
				default:
					var r *state.Run
					if r, err = s.GetRun(ctx, "r1"); err == nil {
						err = s.SaveRun(ctx, r, evs...)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, err := b.Events(ctx, "r1", 0, 0)
	ok(t, err)
	want := 0
	for c := range calls {
		want += 2 * writers * (1 + c%3)
	}
	if len(evs) != want {
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has number %d: numbers must run from 1 without gaps", i+1, ev.Seq)
		}
		var w, c, k, n int
		if _, err := fmt.Sscanf(ev.Message, "w%d-c%d-%d/%d", &w, &c, &k, &n); err != nil {
			t.Fatalf("event %d: %q: %v", ev.Seq, ev.Message, err)
		}
		if k > 0 && evs[i-1].Message != fmt.Sprintf("w%d-c%d-%d/%d", w, c, k-1, n) {
			t.Fatalf("event %d (%s) does not follow its call's event before it: %s", ev.Seq, ev.Message, evs[i-1].Message)
		}
	}
}

// testSharedClaims races the two stores on the same run ID, dedup key and
// lock, many times: each is taken by one of them.
func testSharedClaims(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	const rounds = 20
	race := func(fa, fb func() (bool, error)) (int, error) {
		var wg sync.WaitGroup
		var okA, okB bool
		var errA, errB error
		wg.Go(func() { okA, errA = fa() })
		wg.Go(func() { okB, errB = fb() })
		wg.Wait()
		n := 0
		for _, o := range []bool{okA, okB} {
			if o {
				n++
			}
		}
		return n, errors.Join(errA, errB)
	}
	for i := range rounds {
		id := fmt.Sprint("run-", i)
		createOn := func(s state.Store) func() (bool, error) {
			return func() (bool, error) {
				err := s.CreateRun(ctx, newRun(id, "pb", at(0)))
				if errors.Is(err, state.ErrExists) {
					return false, nil
				}
				return err == nil, err
			}
		}
		n, err := race(createOn(a), createOn(b))
		ok(t, err)
		if n != 1 {
			t.Fatalf("run ID %s created by %d stores", id, n)
		}

		key := fmt.Sprint("key-", i)
		dedupOn := func(s state.Store) func() (bool, error) {
			return func() (bool, error) {
				seen, err := s.Dedup(ctx, key, time.Hour)
				return !seen, err
			}
		}
		if n, err = race(dedupOn(a), dedupOn(b)); err != nil || n != 1 {
			t.Fatalf("dedup key %s recorded first by %d stores (%v)", key, n, err)
		}

		lock := fmt.Sprint("lock-", i)
		lockOn := func(s state.Store, owner string) func() (bool, error) {
			return func() (bool, error) {
				got, _, err := s.AcquireLock(ctx, state.Lock{Key: lock, Owner: owner})
				return got, err
			}
		}
		if n, err = race(lockOn(a, "ra"), lockOn(b, "rb")); err != nil || n != 1 {
			t.Fatalf("lock %s held by %d owners (%v)", lock, n, err)
		}
		locks, err := a.Locks(ctx)
		ok(t, err)
		same(t, len(locks), i+1)
	}
}

// testSharedDeliveries has the two stores commit deliveries of the same
// hooks at once, under different delivery keys and in opposite orders (a
// redelivery reaching another replica): each hook starts one run, and a
// store that lost a hook is told which run has it.
func testSharedDeliveries(t *testing.T, open func(t *testing.T) (a, b state.Store)) {
	a, b := open(t)
	const rounds = 20
	for i := range rounds {
		h1, h2 := fmt.Sprintf("hook/%d-1", i), fmt.Sprintf("hook/%d-2", i)
		unit := func(claim, id string) state.DeliveryUnit {
			u := unitOf(claim, id)
			u.ClaimValue = []byte(id)
			return u
		}
		da := delivery(fmt.Sprintf("delivery/%d-a", i), unit(h1, fmt.Sprintf("a%d-1", i)), unit(h2, fmt.Sprintf("a%d-2", i)))
		db := delivery(fmt.Sprintf("delivery/%d-b", i), unit(h2, fmt.Sprintf("b%d-2", i)), unit(h1, fmt.Sprintf("b%d-1", i)))
		var resA, resB state.DeliveryResult
		var errA, errB error
		var wg sync.WaitGroup
		wg.Go(func() { resA, errA = a.CommitDelivery(ctx, da) })
		wg.Go(func() { resB, errB = b.CommitDelivery(ctx, db) })
		wg.Wait()
		ok(t, errors.Join(errA, errB))
		created := append(append([]string{}, resA.Created...), resB.Created...)
		if len(created) != 2 {
			t.Fatalf("round %d: runs %v created for two hooks", i, created)
		}
		if len(resA.Earlier)+len(resB.Earlier) != 2 {
			t.Fatalf("round %d: %d hooks skipped, want 2 (earlier %q, %q)", i, len(resA.Earlier)+len(resB.Earlier), resA.Earlier, resB.Earlier)
		}
		for _, v := range append(append([][]byte{}, resA.Earlier...), resB.Earlier...) {
			if _, err := b.GetRun(ctx, string(v)); err != nil {
				t.Fatalf("round %d: a skipped hook names run %q: %v", i, v, err)
			}
		}
	}
	runs, err := a.ListRuns(ctx, state.RunFilter{})
	ok(t, err)
	same(t, len(runs), 2*rounds)
}
