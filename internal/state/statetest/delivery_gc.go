package statetest

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
)

func testUnusedDeliveries(t *testing.T, open opener) {
	body := []byte(`{"hooksId":"h1","hooks":[{"hookId":"a"},{"hookId":"b"}]}`)
	finish := func(t *testing.T, s state.Store, id string) {
		t.Helper()
		r, err := s.GetRun(ctx, id)
		ok(t, err)
		r.Status = state.RunSucceeded
		ok(t, s.SaveRun(ctx, r))
	}

	t.Run("a body goes when the last of its runs is deleted, not before", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("u1", "r1", "b1", 0), bodyUnit("u2", "r2", "b1", 1))
		d.ID, d.Body = "b1", body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		d = delivery("d2", bodyUnit("u3", "r3", "b2", -1))
		d.ID, d.Body = "b2", body
		_, err = s.CommitDelivery(ctx, d)
		ok(t, err)

		n, err := s.DeleteUnusedDeliveries(ctx)
		ok(t, err)
		same(t, n, 0)

		finish(t, s, "r1")
		ok(t, s.DeleteRun(ctx, "r1"))
		n, err = s.DeleteUnusedDeliveries(ctx)
		ok(t, err)
		same(t, n, 0) // r2 still refers to b1
		_, err = s.GetDelivery(ctx, "b1")
		ok(t, err)

		finish(t, s, "r2")
		ok(t, s.DeleteRun(ctx, "r2"))
		n, err = s.DeleteUnusedDeliveries(ctx)
		ok(t, err)
		same(t, n, 1)
		_, err = s.GetDelivery(ctx, "b1")
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetDelivery(ctx, "b2")
		ok(t, err)
	})

	t.Run("a run referring to a deleted body is refused", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("u1", "r1", "b1", 0))
		d.ID, d.Body = "b1", body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		// A retry of r1 refers to the same body.
		retry := &state.Run{ID: "r1-retry", Playbook: "pb", Status: state.RunPending, Delivery: &state.DeliveryRef{ID: "b1", Hook: 0}}
		ok(t, s.CreateRun(ctx, retry))

		for _, id := range []string{"r1", "r1-retry"} {
			finish(t, s, id)
			ok(t, s.DeleteRun(ctx, id))
		}
		n, err := s.DeleteUnusedDeliveries(ctx)
		ok(t, err)
		same(t, n, 1)
		err = s.CreateRun(ctx, &state.Run{ID: "late", Playbook: "pb", Status: state.RunPending, Delivery: &state.DeliveryRef{ID: "b1", Hook: 0}})
		errIs(t, err, state.ErrNotFound)
		_, err = s.GetRun(ctx, "late")
		errIs(t, err, state.ErrNotFound)
	})
}
