package statetest

import (
	"testing"

	"github.com/runbook/runbook/internal/state"
)

// bodyUnit is a unit whose run refers to hook of delivery id.
func bodyUnit(claim, runID, id string, hook int) state.DeliveryUnit {
	u := unitOf(claim, runID)
	u.Run.Trigger = map[string]any{"type": "webhook", "route": "sms", "key": "pb/0/" + runID}
	u.Run.Delivery = &state.DeliveryRef{ID: id, Hook: hook}
	return u
}

func testDeliveryBodies(t *testing.T, open opener) {
	body := []byte(`{"hooksId":"h1","hooks":[{"hookId":"a","n":1},{"hookId":"b","s":"\u0000é"}]}`)

	t.Run("a delivery's body is stored once and its runs refer to it", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("u1", "r1", "b1", 0), bodyUnit("u2", "r2", "b1", 1))
		d.ID, d.Body = "b1", body
		res, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		same(t, res.Created, []string{"r1", "r2"})
		got, err := s.GetDelivery(ctx, "b1")
		ok(t, err)
		same(t, string(got), string(body))
		r, err := s.GetRun(ctx, "r2")
		ok(t, err)
		same(t, r.Delivery, &state.DeliveryRef{ID: "b1", Hook: 1})
		same(t, r.Trigger["payload"], nil)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, len(runs), 2)
		same(t, runs[1].Delivery, &state.DeliveryRef{ID: "b1", Hook: 0})
	})

	t.Run("a duplicate delivery stores no body", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("", "r1", "b1", -1))
		d.ID, d.Body = "b1", body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		d = delivery("d1", bodyUnit("", "r2", "b2", -1))
		d.ID, d.Body = "b2", body
		res, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		same(t, res.Duplicate, true)
		_, err = s.GetDelivery(ctx, "b2")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a delivery that creates no run stores no body", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("u1", "r1", "b1", 0))
		d.ID, d.Body = "b1", body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		d = delivery("d2", bodyUnit("u1", "r2", "b2", 0)) // the same hook under another key
		d.ID, d.Body = "b2", body
		res, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		same(t, len(res.Created), 0)
		_, err = s.GetDelivery(ctx, "b2")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a taken delivery ID fails the delivery and writes nothing", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", bodyUnit("", "r1", "b1", -1))
		d.ID, d.Body = "b1", body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		d = delivery("d2", bodyUnit("u2", "r2", "b1", -1))
		d.ID, d.Body = "b1", []byte(`{"other":true}`)
		_, err = s.CommitDelivery(ctx, d)
		errIs(t, err, state.ErrExists)
		_, err = s.GetRun(ctx, "r2")
		errIs(t, err, state.ErrNotFound)
		got, err := s.GetDelivery(ctx, "b1")
		ok(t, err)
		same(t, string(got), string(body))
		same(t, isLive(t, s, "u2"), false)
		same(t, isLive(t, s, "d2"), false)
	})

	t.Run("a delivery without an ID stores no body", func(t *testing.T) {
		s, _ := open(t)
		d := delivery("d1", unitOf("", "r1"))
		d.Body = body
		_, err := s.CommitDelivery(ctx, d)
		ok(t, err)
		_, err = s.GetDelivery(ctx, "")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("an unknown delivery is not found", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.GetDelivery(ctx, "nope")
		errIs(t, err, state.ErrNotFound)
	})
	testInlinePayloads(t, open)
}

func testInlinePayloads(t *testing.T, open opener) {
	t.Run("a listed run of an earlier build has no inline payload and a run read whole has it", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Trigger = map[string]any{"type": "webhook", "key": "k", "payload": map[string]any{"hooksId": "h"}, "hook": map[string]any{"hookId": "a"}}
		create(t, s, r)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runs[0].Trigger, map[string]any{"type": "webhook", "key": "k"})
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Trigger["payload"], map[string]any{"hooksId": "h"})
		same(t, got.Trigger["hook"], map[string]any{"hookId": "a"})
	})
}
