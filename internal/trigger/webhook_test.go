package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/state/statetest"
)

func TestIntakeRefusesBadRequests(t *testing.T) {
	e := newHookEnv(t, 4096, perDeliveryPlaybook)
	good := unsubscribe("d-1", "01012345678")
	cases := []struct {
		name   string
		path   string
		header map[string]string
		body   []byte
		status int
		code   string
		msg    string
	}{
		{"an unknown route is 404", "/hooks/nope", nil, good, 404, "not_found", `no webhook route "nope"`},
		{"a path outside /hooks/ is 404", "/other/sms", nil, good, 404, "not_found", ""},
		{"a form body is 415", "/hooks/sms", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, good, 415, "invalid", "not JSON"},
		{"a missing Content-Type is 415", "/hooks/sms", map[string]string{"Content-Type": ""}, good, 415, "invalid", "missing"},
		{"a Latin-1 charset is 415", "/hooks/sms", map[string]string{"Content-Type": "application/json; charset=ISO-8859-1"}, good, 415, "invalid", "charset"},
		{"no signature header is 401", "/hooks/sms", map[string]string{"X-Cloud-Webhook-Signature": ""}, good, 401, "unauthorized", "missing"},
		{"a wrong signature is 401", "/hooks/sms", map[string]string{"X-Cloud-Webhook-Signature": "guess"}, good, 401, "unauthorized", "does not match"},
		{"another route's secret is 401", "/hooks/sms", map[string]string{"X-Cloud-Webhook-Signature": "other"}, good, 401, "unauthorized", ""},
		{"a body over the limit is 413", "/hooks/sms", nil, envelopeJSON("d-big", "UNSUBSCRIBE", []any{map[string]any{"pad": strings.Repeat("x", 5000)}}), 413, "invalid", "larger than 4096"},
		{"not JSON is 400", "/hooks/sms", nil, []byte("hooksId=1"), 400, "invalid", ""},
		{"a missing hooksId is 400", "/hooks/sms", nil, []byte(`{"webhookConfigId":"c","productName":"SMS","appKey":"k","event":"X","hooks":[{}]}`), 400, "invalid", "hooksId is required"},
		{"a numeric hooksId is 400", "/hooks/sms", nil, []byte(`{"hooksId":7,"event":"X","hooks":[{"hookId":"h"}]}`), 400, "invalid", "hooksId is required (a non-empty string)"},
		{"a missing event is 400", "/hooks/sms", nil, []byte(`{"hooksId":"a","hooks":[{"hookId":"h"}]}`), 400, "invalid", "event is required (a non-empty string)"},
		{"a hook without hookId is 400", "/hooks/sms", nil, envelopeJSON("d-8", "UNSUBSCRIBE", []any{map[string]any{"recipientNo": "01012345678"}}), 400, "invalid", "hooks[0].hookId is required (a non-empty string)"},
		{"a body that is a list is 400", "/hooks/sms", nil, []byte(`[]`), 400, "invalid", "want a JSON object"},
		{"empty hooks are 400", "/hooks/sms", nil, envelopeJSON("d-4", "UNSUBSCRIBE", []any{}), 400, "invalid", "hooks is required"},
		{"a hook that is not an object is 400", "/hooks/sms", nil, envelopeJSON("d-5", "OTHER", []any{1}), 400, "invalid", "hooks[0]"},
		{"data after the object is 400", "/hooks/sms", nil, append(append([]byte{}, good...), []byte(`{}`)...), 400, "invalid", "data after the JSON value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := e.post(c.path, c.header, c.body)
			assert.Equal(t, c.status, a.status, a.raw)
			assert.Equal(t, c.code, a.body["code"], a.raw)
			assert.Contains(t, a.body["error"], c.msg)
		})
	}
	assert.Empty(t, e.starter.started(), "no refused request starts a run")

	t.Run("GET is 405 with Allow: POST", func(t *testing.T) {
		resp, err := http.Get(e.srv.URL + "/hooks/sms")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 405, resp.StatusCode)
		assert.Equal(t, "POST", resp.Header.Get("Allow"))
	})
}

func TestIntakeAcceptsEverySignatureHeaderAndEvent(t *testing.T) {
	e := newHookEnv(t, 0, perDeliveryPlaybook)
	for i, h := range SignatureHeaders {
		a := e.post("/hooks/sms", map[string]string{"X-Cloud-Webhook-Signature": "", h: testSecret}, unsubscribe(fmt.Sprint("sig-", i), "01012345678"))
		assert.Equal(t, 200, a.status, "%s: %s", h, a.raw)
	}
	bodies := map[string][]byte{
		"MESSAGE_RESULT_UPDATE": envelopeJSON("ev-1", "MESSAGE_RESULT_UPDATE", []any{map[string]any{
			"hookId": "ev-1-h0", "requestId": "20260307-abc", "recipientSeq": 1, "recipientNo": "01012345678", "sendNo": "15441234",
			"messageStatus": "FAILED_AD", "resultCode": "3015", "requestDate": "2026-03-07 09:30:00.0"}}),
		"CONVERSION_BLOCK":               envelopeJSON("ev-2", "CONVERSION_BLOCK", []any{map[string]any{"hookId": "ev-2-h0", "recipientNo": "01012345678"}}),
		"INTERNATIONAL_DELIVERY_RECEIPT": envelopeJSON("ev-3", "INTERNATIONAL_DELIVERY_RECEIPT", []any{map[string]any{"hookId": "ev-3-h0", "dlrStatus": "DELIVERED", "recipientNo": "+14155550100"}}),
		"an event of another product":    envelopeJSON("ev-4", "EMAIL_OPENED", []any{map[string]any{"hookId": "ev-4-h0", "anything": true}}),
	}
	for name, b := range bodies {
		a := e.post("/hooks/sms", nil, b)
		assert.Equal(t, 200, a.status, "%s: %s", name, a.raw)
	}
	assert.Len(t, e.starter.started(), 3+len(bodies), "the audit playbook (any event) runs once per delivery")
}

func TestIntakeStartsMatchingPlaybooks(t *testing.T) {
	filtered := `version: 1
name: vip
inputs:
  who: {type: string}
triggers:
  - webhook: {route: sms, event: [UNSUBSCRIBE], if: "trigger.payload.appKey == 'appkey-1' && len(trigger.payload.hooks) > 1"}
    inputs: {who: "${{ trigger.payload.hooks[0].recipientNo }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	otherEvent := strings.NewReplacer("name: audit", "name: results", "{route: sms}", "{route: sms, event: MESSAGE_RESULT_UPDATE}").Replace(perDeliveryPlaybook)
	e := newHookEnv(t, 0, perHookPlaybook, filtered, otherEvent)

	t.Run("each: hook starts one run per hook, with the hook as trigger.hook", func(t *testing.T) {
		a := e.post("/hooks/sms", nil, unsubscribe("fan-1", "01011112222", "01033334444", "01055556666"))
		require.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, "accepted", a.body["status"])
		reqs := e.starter.started()
		var numbers []any
		byName := map[string]int{}
		for _, r := range reqs {
			byName[r.Playbook.Name]++
			if r.Playbook.Name == "suppress" {
				numbers = append(numbers, r.Inputs["number"])
				assert.Equal(t, r.Inputs["number"], r.Trigger["hook"].(map[string]any)["recipientNo"])
				assert.Equal(t, "fan-1", r.Trigger["delivery"])
				assert.Equal(t, "webhook", r.Trigger["type"])
			}
		}
		assert.Equal(t, []any{"01011112222", "01033334444", "01055556666"}, numbers)
		assert.Equal(t, map[string]int{"suppress": 3, "vip": 1}, byName, "the `if` passed (two hooks or more), the event filter kept out results")
		assert.Len(t, a.body["runs"], 4)
	})
	t.Run("the if expression filters out a delivery with one hook", func(t *testing.T) {
		n := len(e.starter.started())
		a := e.post("/hooks/sms", nil, unsubscribe("fan-2", "01077778888"))
		require.Equal(t, 200, a.status, a.raw)
		reqs := e.starter.started()[n:]
		require.Len(t, reqs, 1)
		assert.Equal(t, "suppress", reqs[0].Playbook.Name)
	})
	t.Run("the trigger's inputs are evaluated over the payload", func(t *testing.T) {
		for _, r := range e.starter.started() {
			if r.Playbook.Name == "vip" {
				assert.Equal(t, map[string]any{"who": "01011112222"}, r.Inputs)
			}
		}
	})
	t.Run("the event filter starts only the playbooks naming the event", func(t *testing.T) {
		n := len(e.starter.started())
		a := e.post("/hooks/sms", nil, envelopeJSON("ev-9", "MESSAGE_RESULT_UPDATE", []any{map[string]any{
			"hookId": "ev-9-h0", "requestId": "r", "recipientSeq": 2, "recipientNo": "01012345678", "sendNo": "15441234",
			"messageStatus": "COMPLETED", "resultCode": "1000", "requestDate": "2026-03-07 09:30:00.0"}}))
		require.Equal(t, 200, a.status, a.raw)
		reqs := e.starter.started()[n:]
		require.Len(t, reqs, 1)
		assert.Equal(t, "results", reqs[0].Playbook.Name)
		assert.Equal(t, int64(2), reqs[0].Trigger["payload"].(map[string]any)["hooks"].([]any)[0].(map[string]any)["recipientSeq"], "numbers reach playbooks as integers")
	})
	t.Run("a route no playbook names accepts and starts nothing", func(t *testing.T) {
		n := len(e.starter.started())
		a := e.post("/hooks/mail/eu", map[string]string{"X-Cloud-Webhook-Signature": "other"}, unsubscribe("m-1", "01012345678"))
		require.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, []any{}, a.body["runs"])
		assert.Len(t, e.starter.started(), n)
	})
}

func TestIntakeDeduplicates(t *testing.T) {
	e := newHookEnv(t, 0, perHookPlaybook, perDeliveryPlaybook)

	t.Run("20 concurrent redeliveries start exactly one run per hooksId and hookId", func(t *testing.T) {
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
		assert.Len(t, e.starter.started(), 3, "two hooks and one delivery run")
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
	})
	t.Run("the done record is attached to the delivery's claim", func(t *testing.T) {
		b, err := e.store.DedupGet(context.Background(), "webhook/sms/dup-1")
		require.NoError(t, err)
		var rec doneRecord
		require.NoError(t, json.Unmarshal(b, &rec))
		assert.Len(t, rec.Runs, 3)
	})
	t.Run("a delivery key survives reopening the store", func(t *testing.T) {
		seen, err := e.store.Dedup(context.Background(), "webhook/sms/dup-1", 0)
		require.NoError(t, err)
		assert.True(t, seen)
	})
}

func TestIntakeDoneRecordsExpire(t *testing.T) {
	clock := statetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true, Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	pb, err := playbook.Parse("audit.yaml", []byte(perDeliveryPlaybook), playbook.LoadOptions{})
	require.NoError(t, err)
	st := &hookStarter{store: store}
	in, err := NewIntake(IntakeOptions{
		Routes: map[string]Route{"sms": {Secret: testSecret}}, Store: store, Starter: prepStarter{st},
		Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{pb} }, DedupTTL: time.Hour,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	e := &hookEnv{intake: in, srv: srv, starter: st, store: store}
	body := unsubscribe("exp-1", "01012345678")

	require.Equal(t, "accepted", e.post("/hooks/sms", nil, body).body["status"])
	require.Equal(t, "duplicate", e.post("/hooks/sms", nil, body).body["status"])
	clock.Advance(time.Hour + time.Second)
	_, err = store.DedupGet(context.Background(), "webhook/sms/exp-1")
	require.ErrorIs(t, err, state.ErrNotFound, "the done record expired with the claim")
	a := e.post("/hooks/sms", nil, body)
	assert.Equal(t, "accepted", a.body["status"], "after DedupTTL a redelivery is a new delivery")
	assert.Len(t, st.started(), 2)
}

func TestIntakeShutdown(t *testing.T) {
	e := newHookEnv(t, 0, perDeliveryPlaybook)
	require.Equal(t, 200, e.post("/hooks/sms", nil, unsubscribe("s-1", "01012345678")).status)
	require.NoError(t, e.intake.Shutdown(context.Background()))
	_, err := e.store.DedupGet(context.Background(), "webhook/sms/s-1")
	require.NoError(t, err, "Shutdown waited for the done record written after the answer")
	a := e.post("/hooks/sms", nil, unsubscribe("s-2", "01012345678"))
	assert.Equal(t, 503, a.status)
	assert.Equal(t, "unavailable", a.body["code"])
	assert.Equal(t, 404, e.post("/hooks/nope", nil, nil).status, "an unknown route is still 404")
}

func TestNewIntakeRefusesARouteWithoutSecret(t *testing.T) {
	e := newHookEnv(t, 0)
	_, err := NewIntake(IntakeOptions{Routes: map[string]Route{"x": {}}, Store: e.store, Starter: prepStarter{e.starter}, Playbooks: e.intake.opts.Playbooks})
	assert.ErrorContains(t, err, `route "x": a secret is required`)
}
