package trigger

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// unsubscribeHook is a complete UNSUBSCRIBE hook with the changes of
// set applied (a nil value deletes the field).
func unsubscribeHook(id string, set map[string]any) map[string]any {
	h := map[string]any{"hookId": id, "recipientNo": "01012345678", "unsubscribeNo": "0808885555",
		"enterpriseName": "x", "createdDateTime": "2026-03-07T09:30:00.000+09:00"}
	for k, v := range set {
		if v == nil {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	return h
}

func TestIntakeRequiresOnlyTheKeysItRoutesBy(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		status int
		answer string
	}{
		{"an UNSUBSCRIBE hook without unsubscribeNo is accepted",
			string(envelopeJSON("l-1", "UNSUBSCRIBE", []any{unsubscribeHook("l-1-h0", map[string]any{"unsubscribeNo": nil})})),
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"an UNSUBSCRIBE hook with only its hookId is accepted",
			`{"hooksId":"l-2","event":"UNSUBSCRIBE","hooks":[{"hookId":"l-2-h0"}]}`,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"a createdDateTime in another format, a word for a number and a number for a name are accepted",
			string(envelopeJSON("l-3", "UNSUBSCRIBE", []any{unsubscribeHook("l-3-h0", map[string]any{
				"createdDateTime": "2026-03-07 09:30:00", "recipientNo": "call me", "enterpriseName": 7})})),
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"an envelope without webhookConfigId, productName and appKey is accepted",
			`{"hooksId":"l-4","event":"MESSAGE_RESULT_UPDATE","hooks":[{"hookId":"l-4-h0"}]}`,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"an unknown envelope field and a numeric appKey are accepted",
			`{"hooksId":"l-5","webhookConfigId":"c","productName":"SMS","appKey":7,"event":"UNSUBSCRIBE","hooks":[{"hookId":"l-5-h0"}],"extra":{"a":[1,2.5]}}`,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"a messageStatus the docs do not list is accepted",
			`{"hooksId":"l-6","event":"MESSAGE_RESULT_UPDATE","hooks":[{"hookId":"l-6-h0","messageStatus":"LOST","recipientSeq":"1"}]}`,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"an INTERNATIONAL_DELIVERY_RECEIPT without dlrStatus is accepted",
			`{"hooksId":"l-7","event":"INTERNATIONAL_DELIVERY_RECEIPT","hooks":[{"hookId":"l-7-h0"}]}`,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"a missing hooksId is 400",
			`{"event":"UNSUBSCRIBE","hooks":[{"hookId":"h"}]}`,
			400, `{"error":"hooksId is required (a non-empty string)","code":"invalid"}`},
		{"an empty hooksId is 400",
			`{"hooksId":"","event":"UNSUBSCRIBE","hooks":[{"hookId":"h"}]}`,
			400, `{"error":"hooksId is required (a non-empty string)","code":"invalid"}`},
		{"a missing event is 400",
			`{"hooksId":"l-8","hooks":[{"hookId":"h"}]}`,
			400, `{"error":"event is required (a non-empty string)","code":"invalid"}`},
		{"a numeric event is 400",
			`{"hooksId":"l-8","event":1,"hooks":[{"hookId":"h"}]}`,
			400, `{"error":"event is required (a non-empty string)","code":"invalid"}`},
		{"missing hooks are 400",
			`{"hooksId":"l-9","event":"UNSUBSCRIBE"}`,
			400, `{"error":"hooks is required (a non-empty list)","code":"invalid"}`},
		{"hooks that are an object are 400",
			`{"hooksId":"l-9","event":"UNSUBSCRIBE","hooks":{"hookId":"h"}}`,
			400, `{"error":"hooks is required (a non-empty list)","code":"invalid"}`},
		{"a hook that is not an object is 400",
			`{"hooksId":"l-10","event":"UNSUBSCRIBE","hooks":[{"hookId":"h"},"h2"]}`,
			400, `{"error":"hooks[1]: want an object","code":"invalid"}`},
		{"a hook without hookId is 400",
			string(envelopeJSON("l-11", "UNSUBSCRIBE", []any{unsubscribeHook("l-11-h0", nil), unsubscribeHook("", map[string]any{"hookId": nil})})),
			400, `{"error":"hooks[1].hookId is required (a non-empty string)","code":"invalid"}`},
		{"a numeric hookId is 400",
			`{"hooksId":"l-12","event":"UNSUBSCRIBE","hooks":[{"hookId":12}]}`,
			400, `{"error":"hooks[0].hookId is required (a non-empty string)","code":"invalid"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newHookEnv(t, 0, perDeliveryPlaybook)
			a := e.post("/hooks/sms", nil, []byte(c.body))
			assert.Equal(t, c.status, a.status)
			assert.Equal(t, c.answer+"\n", a.raw)
			if c.status != 200 {
				assert.Empty(t, e.starter.started())
				return
			}
			started := e.starter.started()
			require.Len(t, started, 1)
			assert.JSONEq(t, c.body, mustJSON(t, started[0].Trigger["payload"]), "trigger.payload is the body as sent")
		})
	}
}

func TestIntakeLetsThePlaybooksIfDecideOnOptionalFields(t *testing.T) {
	// The hook's unsubscribeNo is optional to the intake; this playbook
	// wants one.
	withNumber := `version: 1
name: with-number
inputs:
  number: {type: string}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook, if: "trigger.hook.unsubscribeNo != nil"}
    inputs: {number: "${{ trigger.hook.unsubscribeNo }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	e := newHookEnv(t, 0, withNumber)
	body := envelopeJSON("if-1", "UNSUBSCRIBE", []any{
		unsubscribeHook("if-1-h0", map[string]any{"unsubscribeNo": nil}),
		unsubscribeHook("if-1-h1", nil),
	})
	a := e.post("/hooks/sms", nil, body)
	assert.Equal(t, 200, a.status)
	assert.Equal(t, `{"status":"accepted","runs":["run-0001"]}`+"\n", a.raw)
	started := e.starter.started()
	require.Len(t, started, 1)
	assert.Equal(t, map[string]any{"number": "0808885555"}, started[0].Inputs)
	assert.Equal(t, "if-1-h1", started[0].Trigger["hook"].(map[string]any)["hookId"])
}

func TestIntakeGivesTheSMSEventsHookFieldsToIfAndInputs(t *testing.T) {
	// One playbook per event, each reading FIDELITY's fields of that
	// event's hooks in its `if` and inputs, and one field no document
	// names (passed through untouched).
	playbook := func(name, event, cond, inputs string) string {
		return fmt.Sprintf(`version: 1
name: %s
inputs:
  v: {type: string}
  extra: {type: map, default: {}}
triggers:
  - webhook: {route: sms, event: %s, each: hook, if: %q}
    inputs: {v: %q, extra: "${{ trigger.hook.vendorData }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`, name, event, cond, inputs)
	}
	e := newHookEnv(t, 0,
		playbook("results", EventMessageResultUpdate,
			"trigger.hook.messageStatus == 'FAILED' && trigger.hook.recipientSeq == 2",
			"${{ trigger.hook.requestId }}/${{ trigger.hook.recipientNo }}/${{ trigger.hook.sendNo }}/${{ trigger.hook.resultCode }}/${{ trigger.hook.requestDate }}/${{ trigger.hook.receiveDate }}"),
		playbook("blocks", EventConversionBlock, "trigger.hook.recipientNo != ''", "${{ trigger.hook.recipientNo }}"),
		playbook("receipts", EventInternationalReceipt, "trigger.hook.dlrStatus in ['EXPIRED', 'REJECTED']",
			"${{ trigger.hook.requestId }}/${{ trigger.hook.recipientSeq }}/${{ trigger.hook.recipientNo }}/${{ trigger.hook.dlrStatus }}"),
	)
	vendor := map[string]any{"list": []any{int64(1), 2.5, "x"}, "nested": map[string]any{"ok": true}}
	cases := []struct {
		name   string
		body   []byte
		answer string
		inputs []map[string]any
	}{
		{"MESSAGE_RESULT_UPDATE: the FAILED hook starts a run with its fields",
			envelopeJSON("e-1", EventMessageResultUpdate, []any{
				map[string]any{"hookId": "e-1-h0", "requestId": "20260307-abc", "recipientSeq": 1, "recipientNo": "01011112222", "sendNo": "15441234",
					"messageStatus": "COMPLETED", "resultCode": "1000", "requestDate": "2026-03-07 09:30:00.0", "receiveDate": "2026-03-07 09:30:02.0"},
				map[string]any{"hookId": "e-1-h1", "requestId": "20260307-abc", "recipientSeq": 2, "recipientNo": "01033334444", "sendNo": "15441234",
					"messageStatus": "FAILED", "resultCode": "3015", "requestDate": "2026-03-07 09:30:00.0", "receiveDate": "2026-03-07 09:30:03.0",
					"vendorData": vendor},
			}),
			`{"status":"accepted","runs":["run-0001"]}`,
			[]map[string]any{{"v": "20260307-abc/01033334444/15441234/3015/2026-03-07 09:30:00.0/2026-03-07 09:30:03.0", "extra": vendor}}},
		{"CONVERSION_BLOCK: each hook starts a run with its recipientNo",
			envelopeJSON("e-2", EventConversionBlock, []any{
				map[string]any{"hookId": "e-2-h0", "recipientNo": "01055556666", "vendorData": vendor},
				map[string]any{"hookId": "e-2-h1", "recipientNo": "01077778888", "vendorData": map[string]any{}},
			}),
			`{"status":"accepted","runs":["run-0002","run-0003"]}`,
			[]map[string]any{{"v": "01055556666", "extra": vendor}, {"v": "01077778888", "extra": map[string]any{}}}},
		{"INTERNATIONAL_DELIVERY_RECEIPT: the EXPIRED hook starts a run with its fields",
			envelopeJSON("e-3", EventInternationalReceipt, []any{
				map[string]any{"hookId": "e-3-h0", "requestId": "r-9", "recipientSeq": 1, "recipientNo": "+14155550100", "dlrStatus": "DELIVERED"},
				map[string]any{"hookId": "e-3-h1", "requestId": "r-9", "recipientSeq": 2, "recipientNo": "+14155550101", "dlrStatus": "EXPIRED", "vendorData": vendor},
			}),
			`{"status":"accepted","runs":["run-0004"]}`,
			[]map[string]any{{"v": "r-9/2/+14155550101/EXPIRED", "extra": vendor}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(e.starter.started())
			a := e.post("/hooks/sms", nil, c.body)
			assert.Equal(t, 200, a.status)
			assert.Equal(t, c.answer+"\n", a.raw)
			var inputs []map[string]any
			for _, r := range e.starter.started()[n:] {
				inputs = append(inputs, r.Inputs)
			}
			assert.Equal(t, c.inputs, inputs)
		})
	}
}

func TestIntakeAnswersAHookDeliveredBeforeAsADuplicate(t *testing.T) {
	t.Run("a hook delivered again under another hooksId", func(t *testing.T) {
		e := newHookEnv(t, 0, perHookPlaybook)
		first := envelopeJSON("first", "UNSUBSCRIBE", []any{unsubscribeHook("h-a", nil), unsubscribeHook("h-b", nil)})
		a := e.post("/hooks/sms", nil, first)
		assert.Equal(t, 200, a.status)
		assert.Equal(t, `{"status":"accepted","runs":["run-0001","run-0002"]}`+"\n", a.raw)

		again := envelopeJSON("again", "UNSUBSCRIBE", []any{unsubscribeHook("h-b", nil)})
		a = e.post("/hooks/sms", nil, again)
		assert.Equal(t, 200, a.status)
		assert.Equal(t, `{"status":"duplicate","runs":["run-0002"]}`+"\n", a.raw, "the hook's first run")
		a = e.post("/hooks/sms", nil, again)
		assert.Equal(t, `{"status":"duplicate","runs":["run-0002"]}`+"\n", a.raw, "its redelivery answers the same")
		assert.Len(t, e.starter.started(), 2, "nothing started again")
	})
	t.Run("a hook's claim names its runs: they are the answer, not a run found by scanning", func(t *testing.T) {
		e := newHookEnv(t, 0, perHookPlaybook)
		ctx := context.Background()
		claim := "webhook/sms/unit/suppress/0/id:h-kept"
		_, err := e.store.Dedup(ctx, claim, DefaultDedupTTL)
		require.NoError(t, err)
		require.NoError(t, e.store.DedupSet(ctx, claim, []byte(`{"runs":["run-kept"]}`)))
		// A run a scan would find for the hook, which the claim does not name.
		require.NoError(t, e.store.CreateRun(ctx, &state.Run{ID: "run-scanned", Playbook: "suppress", Status: state.RunSucceeded,
			Trigger: map[string]any{"type": "webhook", "route": "sms", "key": "suppress/0/id:h-kept"}}))
		a := e.post("/hooks/sms", nil, envelopeJSON("later", "UNSUBSCRIBE", []any{unsubscribeHook("h-kept", nil)}))
		assert.Equal(t, 200, a.status)
		assert.Equal(t, `{"status":"duplicate","runs":["run-kept"]}`+"\n", a.raw)
		assert.Empty(t, e.starter.started())
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// strictStarter refuses, as the engine does (fault.Invalid), a run whose
// inputs lack one the playbook requires or give a string input another type.
type strictStarter struct{ prepStarter }

func (s strictStarter) check(req StartRequest) error {
	for _, in := range req.Playbook.Inputs {
		v, ok := req.Inputs[in.Name]
		if !ok && in.Required && !in.HasDefault {
			return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("input %q is required", in.Name)}
		}
		if _, isString := v.(string); ok && in.Type == "string" && !isString {
			return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("input %q: must be a string", in.Name)}
		}
	}
	return nil
}

func (s strictStarter) Prepare(ctx context.Context, req StartRequest) (*state.Run, []state.Event, error) {
	if err := s.check(req); err != nil {
		return nil, nil, err
	}
	return s.prepStarter.Prepare(ctx, req)
}

func TestIntakeSkipsAHookItsPlaybookRefuses(t *testing.T) {
	// A required number and an optional string with a default, as the
	// shipped sms-unsubscribe playbook has.
	suppress := `version: 1
name: suppress
inputs:
  number: {type: string, required: true}
  unsubscribe_no: {type: string, default: ""}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs: {number: "${{ trigger.hook.recipientNo }}", unsubscribe_no: "${{ trigger.hook.unsubscribeNo }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	e := newEnvWith(t, 0, func(st *hookStarter) Preparer { return strictStarter{prepStarter{st}} }, suppress)
	body := envelopeJSON("r-1", "UNSUBSCRIBE", []any{
		unsubscribeHook("r-1-h0", map[string]any{"unsubscribeNo": nil}), // the default applies
		unsubscribeHook("r-1-h1", map[string]any{"recipientNo": nil}),   // required: refused
		unsubscribeHook("r-1-h2", map[string]any{"recipientNo": 1012345678}),
	})
	a := e.post("/hooks/sms", nil, body)
	assert.Equal(t, 200, a.status)
	assert.Equal(t, `{"status":"accepted","runs":["run-0001"],"skipped":["suppress","suppress"]}`+"\n", a.raw)
	started := e.starter.started()
	require.Len(t, started, 1)
	assert.Equal(t, map[string]any{"number": "01012345678"}, started[0].Inputs, "an absent field leaves its input unset")
}
