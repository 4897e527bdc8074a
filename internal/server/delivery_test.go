package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// echoPlaybook starts one run per hook; its first step records what the
// run sees of the delivery, then it waits for an approval, and its last
// step reads the delivery again (after a restart, in the tests below).
const echoPlaybook = `version: 1
name: echo
inputs:
  token: {type: string, default: "", secret: true}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs: {token: "${{ trigger.hook.token ?? \"\" }}"}
steps:
  - id: seen
    uses: set
    with: {number: "${{ trigger.hook.recipientNo }}", delivery: "${{ trigger.payload.hooksId }}", hooks: "${{ len(trigger.payload.hooks) }}"}
  - {id: gate, uses: approval, if: "${{ trigger.payload.productName == \"WAIT\" }}", with: {message: go?}}
  - id: after
    uses: set
    with: {number: "${{ trigger.hook.recipientNo }}"}
`

func postHooks(t *testing.T, e *env, body string) []string {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/hooks/sms", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var ans struct{ Runs []string }
	require.NoError(t, jsonDecode(resp, &ans))
	return ans.Runs
}

func stepOutputs(run map[string]any, id string) map[string]any {
	for _, s := range run["steps"].([]any) {
		if s := s.(map[string]any); s["id"] == id {
			out, _ := s["outputs"].(map[string]any)
			return out
		}
	}
	return nil
}

// A delivery's body is stored once: each run's record keeps a reference
// (delivery ID, hook index), its expressions see trigger.payload and
// trigger.hook resolved from the stored body, a run's own page shows them
// and a listing never does.
func TestADeliveryIsStoredOnceAndItsRunsSeeItsPayload(t *testing.T) {
	var store state.Store
	e := newEnv(t, map[string]string{"echo.yaml": echoPlaybook}, func(o *server.Options) { store = o.Engine.Store })
	ids := postHooks(t, e, hooksBody(t, "d-1", 3))
	require.Len(t, ids, 3)
	var deliveryID string
	for i, id := range ids {
		run := e.waitStatus(id, state.RunSucceeded)
		assert.Equal(t, map[string]any{"number": fmt.Sprintf("010%08d", i), "delivery": "d-1", "hooks": float64(3)}, stepOutputs(run, "seen"))
		trig := run["trigger"].(map[string]any)
		assert.Equal(t, "d-1", trig["payload"].(map[string]any)["hooksId"], "a run's page resolves its payload")
		assert.Equal(t, fmt.Sprintf("d-1-%d", i), trig["hook"].(map[string]any)["hookId"])
		ref := run["delivery"].(map[string]any)
		assert.Equal(t, float64(i), ref["hook"])
		deliveryID = ref["id"].(string)

		rec, err := store.GetRun(context.Background(), id)
		require.NoError(t, err)
		assert.NotContains(t, rec.Trigger, "payload", "the run record refers to the delivery")
		assert.NotContains(t, rec.Trigger, "hook")
	}
	body, err := store.GetDelivery(context.Background(), deliveryID)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"hooksId":"d-1"`)

	list := e.api("GET", "/api/v1/runs?limit=1000", nil)
	require.Equal(t, 200, list.status)
	assert.NotContains(t, string(list.body), "payload")
	assert.NotContains(t, string(list.body), "recipientNo")
	assert.Contains(t, string(list.body), `"delivery":{"id":"`+deliveryID+`"`)
}

// A secret input read from a hook is masked in the stored body, as it was
// in each run's trigger when the trigger carried the payload.
func TestASecretReadFromAHookIsMaskedInTheStoredDelivery(t *testing.T) {
	var store state.Store
	e := newEnv(t, map[string]string{"echo.yaml": echoPlaybook}, func(o *server.Options) { store = o.Engine.Store })
	body := `{"hooksId":"d-s","productName":"SMS","event":"UNSUBSCRIBE","hooks":[{"hookId":"a","recipientNo":"01011112222","token":"tok-very-secret-1"}]}`
	ids := postHooks(t, e, body)
	require.Len(t, ids, 1)
	run := e.waitStatus(ids[0], state.RunSucceeded)
	stored, err := store.GetDelivery(context.Background(), run["delivery"].(map[string]any)["id"].(string))
	require.NoError(t, err)
	assert.NotContains(t, string(stored), "tok-very-secret-1")
	assert.Contains(t, string(stored), "01011112222")
	assert.NotContains(t, string(e.api("GET", "/api/v1/runs/"+ids[0], nil).body), "tok-very-secret-1")
}

// A run resumed by another process (a restart) reads its delivery from
// the store: its steps after the restart see the same payload and hook.
func TestADeliveryRunResumedAfterARestartSeesItsHook(t *testing.T) {
	e := newEnv(t, map[string]string{"echo.yaml": echoPlaybook})
	body := strings.Replace(hooksBody(t, "d-w", 2), `"productName":"SMS"`, `"productName":"WAIT"`, 1)
	ids := postHooks(t, e, body)
	require.Len(t, ids, 2)
	for _, id := range ids {
		e.waitStep(id, "gate", state.StepWaiting)
	}
	e.stop()
	e = start(t, e.dir, e.state, nil)
	for i, id := range ids {
		require.Eventually(t, func() bool { // once the resumed run waits again
			return e.api("POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true}).status == 200
		}, 10*time.Second, 20*time.Millisecond)
		run := e.waitStatus(id, state.RunSucceeded)
		assert.Equal(t, map[string]any{"number": fmt.Sprintf("010%08d", i)}, stepOutputs(run, "after"))
	}
}

// A run of an earlier build carries the payload in its trigger: it is
// resumed with it, shown with it, and listed without it.
func TestARunWithAnInlinePayloadStillRuns(t *testing.T) {
	dir := t.TempDir()
	statePath := dir + "/state.db"
	e := start(t, t.TempDir(), statePath, map[string]string{"echo.yaml": echoPlaybook})
	e.stop()
	store := openStore(t, statePath)
	pb := readFile(t, e.dir+"/echo.yaml")
	hook := map[string]any{"hookId": "old-1", "recipientNo": "01099998888"}
	run := &state.Run{ID: "20260101T000000-old1", Playbook: "echo", File: e.dir + "/echo.yaml", Snapshot: pb, Status: state.RunPending,
		Trigger: map[string]any{"type": "webhook", "route": "sms", "payload": map[string]any{"hooksId": "old", "productName": "SMS", "hooks": []any{hook}}, "hook": hook}}
	require.NoError(t, store.CreateRun(context.Background(), run))
	require.NoError(t, store.Close())

	e = start(t, e.dir, statePath, nil)
	got := e.waitStatus(run.ID, state.RunSucceeded)
	assert.Equal(t, map[string]any{"number": "01099998888"}, stepOutputs(got, "after"))
	assert.Equal(t, "old", got["trigger"].(map[string]any)["payload"].(map[string]any)["hooksId"])
	list := e.api("GET", "/api/v1/runs", nil)
	assert.Contains(t, string(list.body), run.ID)
	assert.NotContains(t, string(list.body), "01099998888")
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

func openStore(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	return s
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
