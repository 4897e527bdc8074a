package trigger

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// runCount is the number of runs committed to e's store.
func (e *hookEnv) runCount(t *testing.T) int {
	t.Helper()
	runs, err := e.store.ListRuns(context.Background(), state.RunFilter{})
	require.NoError(t, err)
	return len(runs)
}

// mustRun is the committed run of id.
func mustRun(t *testing.T, e *hookEnv, id any) *state.Run {
	t.Helper()
	r, err := e.store.GetRun(context.Background(), id.(string))
	require.NoError(t, err)
	return r
}

func TestIntakeWithPreparerCommitsEachDeliveryOnce(t *testing.T) {
	e := newHookEnv(t, 0, perHookPlaybook, perDeliveryPlaybook)

	t.Run("each: hook starts one run per hook, committed with the delivery", func(t *testing.T) {
		a := e.post("/hooks/sms", nil, unsubscribe("fan-1", "01011112222", "01033334444", "01055556666"))
		require.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, "accepted", a.body["status"])
		require.Len(t, a.body["runs"], 4)
		var numbers []any
		for _, r := range e.starter.started() {
			if r.Playbook.Name == "suppress" {
				numbers = append(numbers, r.Inputs["number"])
			}
		}
		assert.Equal(t, []any{"01011112222", "01033334444", "01055556666"}, numbers)
		for _, id := range a.body["runs"].([]any) {
			r, err := e.store.GetRun(context.Background(), id.(string))
			require.NoError(t, err, "every run answered is committed")
			assert.Equal(t, "fan-1", r.Trigger["delivery"])
		}
		assert.Equal(t, 4, e.runCount(t))
		b, err := e.store.DedupGet(context.Background(), "webhook/sms/fan-1")
		require.NoError(t, err, "the done record was committed with the runs")
		assert.Contains(t, string(b), a.body["runs"].([]any)[3].(string))
	})

	t.Run("20 concurrent redeliveries start exactly one run per hooksId and hookId", func(t *testing.T) {
		n, runs := len(e.starter.started()), e.runCount(t)
		body := unsubscribe("dup-1", "01011112222", "01033334444")
		var wg sync.WaitGroup
		answers := make([]answer, 20)
		for i := range answers {
			wg.Go(func() { answers[i] = e.post("/hooks/sms", nil, body) })
		}
		wg.Wait()
		statuses := map[string]int{}
		for _, a := range answers {
			require.Equal(t, 200, a.status, a.raw)
			statuses[a.body["status"].(string)]++
			assert.Len(t, a.body["runs"], 3, "every answer names the delivery's runs")
		}
		assert.Equal(t, map[string]int{"accepted": 1, "duplicate": 19}, statuses)
		assert.Len(t, e.starter.started(), n+3, "two hooks and one delivery run")
		assert.Equal(t, runs+3, e.runCount(t))
	})

	t.Run("redeliveries racing through two intakes over one store start one run per unit", func(t *testing.T) {
		n, runs := len(e.starter.started()), e.runCount(t)
		other, err := NewIntake(e.intake.opts)
		require.NoError(t, err)
		srv2 := httptest.NewServer(other)
		defer srv2.Close()
		e2 := &hookEnv{intake: other, srv: srv2, starter: e.starter, store: e.store}
		body := unsubscribe("race-1", "01011112222", "01033334444")
		var wg sync.WaitGroup
		answers := make([]answer, 16)
		for i := range answers {
			env := e
			if i%2 == 1 {
				env = e2
			}
			wg.Go(func() { answers[i] = env.post("/hooks/sms", nil, body) })
		}
		wg.Wait()
		statuses := map[string]int{}
		for _, a := range answers {
			require.Equal(t, 200, a.status, a.raw)
			statuses[a.body["status"].(string)]++
			assert.Len(t, a.body["runs"], 3)
		}
		assert.Equal(t, 1, statuses["accepted"])
		assert.Len(t, e.starter.started(), n+3)
		assert.Equal(t, runs+3, e.runCount(t))
	})

	t.Run("a hook redelivered under a new hooksId starts no second per-hook run", func(t *testing.T) {
		n := len(e.starter.started())
		body := envelopeJSON("dup-2", "UNSUBSCRIBE", []any{map[string]any{
			"hookId": "dup-1-h0", "recipientNo": "01011112222", "unsubscribeNo": "0808885555",
			"enterpriseName": "x", "createdDateTime": "2026-03-07T09:30:00.000+09:00"}})
		a := e.post("/hooks/sms", nil, body)
		require.Equal(t, 200, a.status, a.raw)
		reqs := e.starter.started()[n:]
		require.Len(t, reqs, 1, "only the per-delivery playbook runs")
		assert.Equal(t, "audit", reqs[0].Playbook.Name)
		assert.Equal(t, "accepted", a.body["status"])
		require.Len(t, a.body["runs"], 2, "the hook's first run and the audit run started")
		assert.Equal(t, "suppress/0/id:dup-1-h0", mustRun(t, e, a.body["runs"].([]any)[0]).Trigger["key"])
		trig, err := state.ResolveTrigger(context.Background(), e.store, mustRun(t, e, a.body["runs"].([]any)[1]))
		require.NoError(t, err)
		assert.Equal(t, reqs[0].Trigger, trig, "the run launched is the run committed, as it sees its trigger")
	})

	t.Run("a commit that fails midway starts nothing, and its redelivery starts every run once", func(t *testing.T) {
		n, runs := len(e.starter.started()), e.runCount(t)
		e.starter.mu.Lock()
		e.starter.failAt = e.starter.calls + 2 // the second unit cannot be written
		e.starter.mu.Unlock()
		body := unsubscribe("crash-1", "01011110001", "01011110002")
		a := e.post("/hooks/sms", nil, body)
		require.Equal(t, 500, a.status, a.raw)
		assert.Equal(t, "internal", a.body["code"])
		assert.Len(t, e.starter.started(), n, "nothing was launched")
		assert.Equal(t, runs, e.runCount(t), "the first unit's run was rolled back with the rest")
		_, err := e.store.DedupGet(context.Background(), "webhook/sms/crash-1")
		require.ErrorIs(t, err, state.ErrNotFound)

		a = e.post("/hooks/sms", nil, body)
		require.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, "accepted", a.body["status"])
		assert.Len(t, a.body["runs"], 3, "the first hook's claim was rolled back too")
		keys := map[string]int{}
		for _, r := range e.starter.started()[n:] {
			keys[r.Trigger["key"].(string)]++
		}
		assert.Equal(t, map[string]int{"suppress/0/id:crash-1-h0": 1, "suppress/0/id:crash-1-h1": 1, "audit/0/delivery:crash-1": 1}, keys)
		assert.Equal(t, runs+3, e.runCount(t))

		a = e.post("/hooks/sms", nil, body)
		assert.Equal(t, "duplicate", a.body["status"])
		assert.Len(t, a.body["runs"], 3)
		assert.Len(t, e.starter.started(), n+3)
	})

	t.Run("prepared runs of duplicates and failed commits are never launched", func(t *testing.T) {
		e.starter.mu.Lock()
		defer e.starter.mu.Unlock()
		for id := range e.starter.ready {
			_, err := e.store.GetRun(context.Background(), id)
			assert.ErrorIs(t, err, state.ErrNotFound, "run %s was committed but not launched", id)
		}
	})
}
