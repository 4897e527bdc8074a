package statetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// doneList is a Delivery.Done that records the IDs it was given, then
// "+value" for each skipped unit's claim value that is not nil.
func doneList(created []string, earlier [][]byte) []byte {
	s := strings.Join(created, ",")
	for _, v := range earlier {
		if v != nil {
			s += "+" + string(v)
		}
	}
	return []byte(s)
}

func delivery(key string, units ...state.DeliveryUnit) state.Delivery {
	return state.Delivery{Key: key, TTL: time.Hour, Units: units, Done: doneList}
}

func unitOf(claim, id string) state.DeliveryUnit {
	return state.DeliveryUnit{Claim: claim, Run: newRun(id, "pb", at(0)),
		Events: []state.Event{{Type: "run.created", Time: at(0)}}}
}

// isLive reports whether key is a live dedup key (recording it if not,
// so call it last).
func isLive(t *testing.T, s state.Store, key string) bool {
	t.Helper()
	seen, err := s.Dedup(ctx, key, time.Hour)
	ok(t, err)
	return seen
}

func testDeliveries(t *testing.T, open opener) {
	t.Run("a delivery creates its runs and claims its keys with the done value", func(t *testing.T) {
		s, _ := open(t)
		res, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r1"), unitOf("", "r2")))
		ok(t, err)
		same(t, res, state.DeliveryResult{Created: []string{"r1", "r2"}})
		for _, id := range []string{"r1", "r2"} {
			r, err := s.GetRun(ctx, id)
			ok(t, err)
			same(t, r.Status, state.RunPending)
			evs, err := s.Events(ctx, id, 0, 0)
			ok(t, err)
			same(t, seqs(evs), []uint64{1})
		}
		v, err := s.DedupGet(ctx, "d1")
		ok(t, err)
		same(t, string(v), "r1,r2")
		same(t, isLive(t, s, "u1"), true)
	})

	t.Run("a live key is a duplicate that writes nothing", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r1")))
		ok(t, err)
		res, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u2", "r2")))
		ok(t, err)
		same(t, res, state.DeliveryResult{Duplicate: true, Value: []byte("r1")})
		_, err = s.GetRun(ctx, "r2")
		errIs(t, err, state.ErrNotFound)
		same(t, isLive(t, s, "u2"), false)
	})

	t.Run("a key claimed without a value is a duplicate with no value", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.Dedup(ctx, "d1", time.Hour)
		ok(t, err)
		res, err := s.CommitDelivery(ctx, delivery("d1", unitOf("", "r1")))
		ok(t, err)
		same(t, res, state.DeliveryResult{Duplicate: true})
		_, err = s.GetRun(ctx, "r1")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a unit whose claim is live is skipped and left out of the done value", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.Dedup(ctx, "u1", time.Hour)
		ok(t, err)
		res, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r1"), unitOf("u2", "r2"), unitOf("u2", "r3")))
		ok(t, err)
		same(t, res.Created, []string{"r2"})
		for _, id := range []string{"r1", "r3"} {
			_, err = s.GetRun(ctx, id)
			errIs(t, err, state.ErrNotFound)
		}
		v, err := s.DedupGet(ctx, "d1")
		ok(t, err)
		same(t, string(v), "r2")
	})

	t.Run("a unit's claim keeps its value, which a unit skipped for it gets in Earlier and Done", func(t *testing.T) {
		s, _ := open(t)
		withValue := func(claim, id, val string) state.DeliveryUnit {
			u := unitOf(claim, id)
			u.ClaimValue = []byte(val)
			return u
		}
		res, err := s.CommitDelivery(ctx, delivery("d1", withValue("u1", "r1", "v1"), unitOf("u2", "r2")))
		ok(t, err)
		same(t, res, state.DeliveryResult{Created: []string{"r1", "r2"}})
		v, err := s.DedupGet(ctx, "u1")
		ok(t, err)
		same(t, string(v), "v1")
		_, err = s.DedupGet(ctx, "u2")
		errIs(t, err, state.ErrNotFound)

		res, err = s.CommitDelivery(ctx, delivery("d2", withValue("u1", "r3", "x"), withValue("u3", "r4", "v3"),
			withValue("u2", "r5", "x"), withValue("u3", "r6", "x")))
		ok(t, err)
		same(t, res, state.DeliveryResult{Created: []string{"r4"}, Earlier: [][]byte{[]byte("v1"), nil, []byte("v3")}})
		v, err = s.DedupGet(ctx, "d2")
		ok(t, err)
		same(t, string(v), "r4+v1+v3")
		v, err = s.DedupGet(ctx, "u1")
		ok(t, err)
		same(t, string(v), "v1") // a skipped unit leaves the claim's value as it was
	})

	t.Run("a taken run ID fails the whole delivery", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("taken", "pb", at(0)))
		_, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r1"), unitOf("u2", "taken")))
		errIs(t, err, state.ErrExists)
		_, err = s.GetRun(ctx, "r1")
		errIs(t, err, state.ErrNotFound)
		same(t, isLive(t, s, "u1"), false)
		same(t, isLive(t, s, "d1"), false)
	})

	t.Run("claims expire after the ttl", func(t *testing.T) {
		s, clock := open(t)
		if clock == nil {
			t.Skip("needs a clock the suite controls")
		}
		_, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r1")))
		ok(t, err)
		clock.Advance(2 * time.Hour)
		res, err := s.CommitDelivery(ctx, delivery("d1", unitOf("u1", "r2")))
		ok(t, err)
		same(t, res.Created, []string{"r2"})
	})

	t.Run("concurrent deliveries of one key create its runs once", func(t *testing.T) {
		s, _ := open(t)
		var wg sync.WaitGroup
		results := make([]state.DeliveryResult, 8)
		errs := make([]error, len(results))
		for i := range results {
			wg.Go(func() {
				id := "r" + string(rune('a'+i))
				results[i], errs[i] = s.CommitDelivery(ctx, delivery("d1", unitOf("u1", id)))
			})
		}
		wg.Wait()
		created := 0
		for i, res := range results {
			ok(t, errs[i])
			if !res.Duplicate {
				created++
				same(t, len(res.Created), 1)
			}
		}
		same(t, created, 1)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, len(runs), 1)
	})

	t.Run("a cancelled context writes nothing", func(t *testing.T) {
		s, _ := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.CommitDelivery(cctx, delivery("d1", unitOf("u1", "r1")))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		_, err = s.GetRun(ctx, "r1")
		errIs(t, err, state.ErrNotFound)
	})
}
