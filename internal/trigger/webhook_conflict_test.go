package trigger

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// takenRunID is a run another process created: clashStarter draws it.
const takenRunID = "run-taken"

// clashStarter is a prepStarter whose first clashes preparations draw a
// run ID already taken, as a second process may in the same second.
type clashStarter struct {
	prepStarter
	clashes *int // guarded by mu
}

func (s clashStarter) Prepare(ctx context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	r, evs, err := s.prepStarter.Prepare(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if *s.clashes > 0 {
		*s.clashes--
		delete(s.ready, r.ID)
		r.ID = takenRunID
		s.ready[r.ID] = req
	}
	return r, evs, err
}

func TestIntakeWithPreparerDrawsATakenRunIDAgain(t *testing.T) {
	cases := []struct {
		name    string
		clashes int // preparations that draw the taken ID
		status  int
	}{
		{"an ID taken once is drawn again and the delivery accepted", 1, 200},
		{"an ID taken on every attempt but the last is drawn again and the delivery accepted", commitAttempts - 1, 200},
		{"an ID taken on every attempt fails the delivery; its redelivery is accepted", commitAttempts, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clashes := c.clashes
			e := newEnvWith(t, 0, func(st *hookStarter) Preparer { return clashStarter{prepStarter{st}, &clashes} }, perDeliveryPlaybook)
			require.NoError(t, e.store.CreateRun(context.Background(), &state.Run{ID: takenRunID, Playbook: "audit"}))
			body := unsubscribe("clash-1", "01012345678")

			a := e.post("/hooks/sms", nil, body)
			require.Equal(t, c.status, a.status, a.raw)
			if c.status != 200 {
				assert.Equal(t, "internal", a.body["code"])
				assert.Empty(t, e.starter.started(), "nothing was launched")
				assert.Equal(t, 1, e.runCount(t), "nothing was committed")
				_, err := e.store.DedupGet(context.Background(), "webhook/sms/clash-1")
				require.ErrorIs(t, err, state.ErrNotFound)
				a = e.post("/hooks/sms", nil, body)
				require.Equal(t, 200, a.status, a.raw)
			}
			assert.Equal(t, "accepted", a.body["status"])
			require.Len(t, a.body["runs"], 1)
			id := a.body["runs"].([]any)[0].(string)
			assert.NotEqual(t, takenRunID, id)
			r, err := e.store.GetRun(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, "clash-1", r.Trigger["delivery"])
			assert.Len(t, e.starter.started(), 1, "one run launched")
			assert.Equal(t, 2, e.runCount(t), "the taken run and the delivery's")
			assert.Equal(t, "duplicate", e.post("/hooks/sms", nil, body).body["status"])
		})
	}
}

// hooksWithIDs builds an UNSUBSCRIBE delivery whose hooks have the given
// hookIds.
func hooksWithIDs(hooksID string, hookIDs ...string) []byte {
	hooks := make([]any, len(hookIDs))
	for i, id := range hookIDs {
		hooks[i] = map[string]any{
			"hookId": id, "recipientNo": "0101234000" + string(rune('0'+i)), "unsubscribeNo": "0808885555",
			"enterpriseName": "x", "createdDateTime": "2026-03-07T09:30:00.000+09:00",
		}
	}
	return envelopeJSON(hooksID, "UNSUBSCRIBE", hooks)
}

func TestIntakeWithPreparerSkipsHooksDeliveredBefore(t *testing.T) {
	// Prepare draws a run ID for every unit, skipped or not: the first
	// delivery's runs are run-0001.., the second's draws follow.
	cases := []struct {
		name   string
		first  []string // hookIds of a first delivery
		again  []string // hookIds of a second one, under a new hooksId
		runs   int      // runs the second starts
		answer string   // the second's answer: every unit's run, in order
	}{
		{"a hook delivered before and listed first starts nothing", []string{"h-a"}, []string{"h-a", "h-b"}, 1,
			`{"status":"accepted","runs":["run-0001","run-0003"]}`},
		{"a hook delivered before and listed last starts nothing", []string{"h-a"}, []string{"h-b", "h-a"}, 1,
			`{"status":"accepted","runs":["run-0002","run-0001"]}`},
		{"the last two hooks delivered before start nothing", []string{"h-a", "h-b"}, []string{"h-c", "h-a", "h-b"}, 1,
			`{"status":"accepted","runs":["run-0003","run-0001","run-0002"]}`},
		{"hooks all delivered before start nothing and are a duplicate", []string{"h-a", "h-b"}, []string{"h-b", "h-a"}, 0,
			`{"status":"duplicate","runs":["run-0002","run-0001"]}`},
		{"a hook between two new ones starts nothing", []string{"h-a"}, []string{"h-b", "h-a", "h-c"}, 2,
			`{"status":"accepted","runs":["run-0002","run-0001","run-0004"]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newHookEnv(t, 0, perHookPlaybook)
			a := e.post("/hooks/sms", nil, hooksWithIDs("first", c.first...))
			require.Equal(t, 200, a.status, a.raw)
			require.Len(t, a.body["runs"], len(c.first))

			a, err := e.send("/hooks/sms", nil, hooksWithIDs("again", c.again...), false)
			require.NoError(t, err)
			require.Equal(t, 200, a.status, a.raw)
			assert.Equal(t, c.answer+"\n", a.raw)
			started := e.starter.started()[len(c.first):]
			require.Len(t, started, c.runs, "only the new hooks' runs are launched")
			n := 0
			for _, id := range a.body["runs"].([]any) {
				r, err := e.store.GetRun(context.Background(), id.(string))
				require.NoError(t, err)
				if r.Trigger["delivery"] == "again" {
					assert.Equal(t, started[n].Trigger["key"], r.Trigger["key"], "the run launched is the one committed")
					n++
				}
			}
			assert.Equal(t, c.runs, n)
			assert.Equal(t, len(c.first)+c.runs, e.runCount(t))

			again := e.post("/hooks/sms", nil, hooksWithIDs("again", c.again...))
			assert.Equal(t, strings.Replace(c.answer, `"accepted"`, `"duplicate"`, 1)+"\n", again.raw,
				"a redelivery of the second answers the same runs")
		})
	}
}
