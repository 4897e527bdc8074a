package trigger

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/statetest"
)

func TestStandardSignatureMatchesTheSpecsExample(t *testing.T) {
	// The example of the Standard Webhooks specification.
	key, err := StandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	const id, ts = "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330"
	assert.True(t, standardSignature("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", id, ts, body, [][]byte{key}))
	assert.False(t, standardSignature("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", id, "1614265331", body, [][]byte{key}))
	assert.False(t, standardSignature("v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", id, ts, body, [][]byte{key}), "only v1 entries count")
}

const (
	// The two secrets of the route "events", during a rotation.
	standardOld = "whsec_c2VjcmV0LWtleS1vbmUtMzItYnl0ZXMtbG9uZy0tLQ=="
	standardNew = "whsec_c2Vjb25kLWtleS10d28tMzItYnl0ZXMtbG9uZy0tLQ=="
)

// standardSign is the webhook-signature entry of body under secret.
func standardSign(t *testing.T, secret, id, ts string, body []byte) string {
	t.Helper()
	key, err := StandardKey(secret)
	require.NoError(t, err)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestIntakeVerifiesStandardWebhooks(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	now := at
	generic := `version: 1
name: generic
inputs:
  user: {type: string, default: ""}
triggers:
  - webhook: {route: events}
    inputs: {user: "${{ trigger.payload.data.id }}"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	e := newClockedEnv(t, statetest.NewClock(at), func(o *IntakeOptions) {
		o.Routes["events"] = Route{Verify: VerifyStandard, Secret: standardOld, Secrets: []string{standardNew}}
		o.Now = func() time.Time { return now }
	}, generic)
	body := []byte(`{"type":"user.created","timestamp":"2031-05-06T07:08:00Z","data":{"id":"u-1","n":3}}`)
	ts := strconv.FormatInt(at.Unix(), 10)
	headers := func(id, ts, sig string) map[string]string {
		return map[string]string{"X-Cloud-Webhook-Signature": "", "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig}
	}
	signed := func(id string, b []byte) map[string]string {
		return headers(id, ts, standardSign(t, standardOld, id, ts, b))
	}
	old := func(d time.Duration) string { return strconv.FormatInt(at.Add(-d).Unix(), 10) }
	cases := []struct {
		name   string
		header map[string]string
		body   []byte
		status int
		answer string
	}{
		{"a delivery signed with the secret is accepted", signed("msg_1", body), body,
			200, `{"status":"accepted","runs":["run-0001"]}`},
		{"the same webhook-id signed again later is a duplicate", headers("msg_1", old(-time.Minute), standardSign(t, standardOld, "msg_1", old(-time.Minute), body)), body,
			200, `{"status":"duplicate","runs":["run-0001"]}`},
		{"a delivery signed with the rotated secret is accepted", headers("msg_2", ts, standardSign(t, standardNew, "msg_2", ts, body)), body,
			200, `{"status":"accepted","runs":["run-0003"]}`},
		{"one matching signature among several is enough",
			headers("msg_3", ts, "v1,bm9wZQ== v1a,xyz "+standardSign(t, standardNew, "msg_3", ts, body)+" v2,abc"), body,
			200, `{"status":"accepted","runs":["run-0004"]}`},
		{"a timestamp exactly 5 minutes old is accepted", headers("msg_4", old(5*time.Minute), standardSign(t, standardOld, "msg_4", old(5*time.Minute), body)), body,
			200, `{"status":"accepted","runs":["run-0005"]}`},
		{"a missing webhook-id is 401", headers("", ts, standardSign(t, standardOld, "", ts, body)), body,
			401, `{"error":"webhook-id header is missing (Standard Webhooks)","code":"unauthorized"}`},
		{"a missing webhook-timestamp is 401", headers("msg_5", "", "v1,x"), body,
			401, `{"error":"webhook-timestamp header is missing (Standard Webhooks)","code":"unauthorized"}`},
		{"a missing webhook-signature is 401", headers("msg_5", ts, ""), body,
			401, `{"error":"webhook-signature header is missing (Standard Webhooks)","code":"unauthorized"}`},
		{"the shared-secret header alone is 401", map[string]string{"X-Cloud-Webhook-Signature": standardOld}, body,
			401, `{"error":"webhook-id header is missing (Standard Webhooks)","code":"unauthorized"}`},
		{"a timestamp that is not Unix seconds is 401", headers("msg_5", at.Format(time.RFC3339), "v1,x"), body,
			401, `{"error":"webhook-timestamp \"2031-05-06T07:08:09Z\" is not a Unix time in seconds","code":"unauthorized"}`},
		{"a timestamp 5m1s old is 401", headers("msg_5", old(5*time.Minute+time.Second), standardSign(t, standardOld, "msg_5", old(5*time.Minute+time.Second), body)), body,
			401, `{"error":"webhook-timestamp is 5m1s old; more than 5m0s either way is refused (a replay, or a clock out of sync)","code":"unauthorized"}`},
		{"a timestamp 5m1s ahead is 401", headers("msg_5", old(-5*time.Minute-time.Second), standardSign(t, standardOld, "msg_5", old(-5*time.Minute-time.Second), body)), body,
			401, `{"error":"webhook-timestamp is 5m1s in the future; more than 5m0s either way is refused (a replay, or a clock out of sync)","code":"unauthorized"}`},
		{"a wrong signature is 401", headers("msg_5", ts, standardSign(t, "whsec_b3RoZXI=", "msg_5", ts, body)), body,
			401, `{"error":"no webhook-signature matches the route's secret","code":"unauthorized"}`},
		{"a signature of another webhook-id is 401", headers("msg_5", ts, standardSign(t, standardOld, "msg_6", ts, body)), body,
			401, `{"error":"no webhook-signature matches the route's secret","code":"unauthorized"}`},
		{"a body changed after signing is 401", signed("msg_5", body), append(append([]byte{}, body[:len(body)-1]...), ` }`...),
			401, `{"error":"no webhook-signature matches the route's secret","code":"unauthorized"}`},
		{"a signed body that is not JSON is 400", signed("msg_5", []byte("user=u-1")), []byte("user=u-1"),
			400, `{"error":"body is not JSON: invalid character 'u' looking for beginning of value","code":"invalid"}`},
		{"a signed webhook-id over 256 bytes is 400", signed(strings.Repeat("m", 257), body), body,
			400, `{"error":"webhook-id is longer than 256 bytes","code":"invalid"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := e.post("/hooks/events", c.header, c.body)
			assert.Equal(t, c.status, a.status)
			assert.Equal(t, c.answer+"\n", a.raw)
		})
	}

	started := e.starter.started()
	require.Len(t, started, 4, "one run per accepted delivery")
	r := started[0]
	assert.Equal(t, map[string]any{"user": "u-1"}, r.Inputs)
	assert.Equal(t, "msg_1", r.Trigger["delivery"], "the webhook-id is the delivery's key")
	assert.Equal(t, "user.created", r.Trigger["event"], "the event is the body's type")
	assert.JSONEq(t, string(body), mustJSON(t, r.Trigger["payload"]), "trigger.payload is the body")

	t.Run("the intake's clock decides what is stale", func(t *testing.T) {
		now = at.Add(time.Hour)
		a := e.post("/hooks/events", signed("msg_7", body), body)
		assert.Equal(t, 401, a.status)
		assert.Equal(t, `{"error":"webhook-timestamp is 1h0m0s old; more than 5m0s either way is refused (a replay, or a clock out of sync)","code":"unauthorized"}`+"\n", a.raw)
	})
	t.Run("the sms route still takes its envelope with the shared secret", func(t *testing.T) {
		a := e.post("/hooks/sms", nil, unsubscribe("s-1", "01012345678"))
		assert.Equal(t, 200, a.status)
		assert.Equal(t, `{"status":"accepted","runs":[]}`+"\n", a.raw, "the generic playbook listens on events only")
	})
}

func TestIntakeRoutesAStandardWebhookByItsType(t *testing.T) {
	only := `version: 1
name: only-created
triggers:
  - webhook: {route: events, event: user.created, if: "trigger.payload.data.n > 2"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`
	at := time.Unix(1_900_000_000, 0)
	e := newClockedEnv(t, statetest.NewClock(at), func(o *IntakeOptions) {
		o.Routes = map[string]Route{"events": {Verify: VerifyStandard, Secret: standardNew}}
		o.Now = func() time.Time { return at }
	}, only)
	ts := strconv.FormatInt(at.Unix(), 10)
	for i, c := range []struct {
		body, answer string
	}{
		{`{"type":"user.created","data":{"n":3}}`, `{"status":"accepted","runs":["run-0001"]}`},
		{`{"type":"user.created","data":{"n":1}}`, `{"status":"accepted","runs":[]}`},
		{`{"type":"user.deleted","data":{"n":3}}`, `{"status":"accepted","runs":[]}`},
		{`[1,2,3]`, `{"status":"accepted","runs":[]}`},
	} {
		id := fmt.Sprint("msg_", i)
		a := e.post("/hooks/events", map[string]string{"webhook-id": id, "webhook-timestamp": ts,
			"webhook-signature": standardSign(t, standardNew, id, ts, []byte(c.body))}, []byte(c.body))
		assert.Equal(t, 200, a.status, c.body)
		assert.Equal(t, c.answer+"\n", a.raw, c.body)
	}
}

func TestNewIntakeChecksStandardWebhooksRoutes(t *testing.T) {
	e := newHookEnv(t, 0)
	for _, c := range []struct {
		route Route
		err   string
	}{
		{Route{Verify: "hmac", Secret: "x"}, `webhook route "x": unknown verify mode "hmac" (want one of shared-secret, standard-webhooks)`},
		{Route{Verify: VerifyStandard, Secret: "whsec_not base64!"}, `webhook route "x": secret 1: a Standard Webhooks secret is whsec_ followed by the key in base64`},
		{Route{Verify: VerifyStandard, Secret: standardOld, Secrets: []string{"whsec_"}}, `webhook route "x": secret 2: a Standard Webhooks secret is whsec_`},
		{Route{Verify: VerifyStandard, Secret: standardOld, Secrets: []string{""}}, `webhook route "x": a secret is required`},
	} {
		_, err := NewIntake(IntakeOptions{Routes: map[string]Route{"x": c.route}, Store: e.store, Starter: prepStarter{e.starter}, Playbooks: e.intake.opts.Playbooks})
		assert.ErrorContains(t, err, c.err)
	}
	_, err := NewIntake(IntakeOptions{Routes: map[string]Route{"x": {Verify: VerifyStandard, Secret: strings.TrimPrefix(standardOld, "whsec_")}},
		Store: e.store, Starter: prepStarter{e.starter}, Playbooks: e.intake.opts.Playbooks})
	assert.NoError(t, err, "the whsec_ prefix is optional")
}
