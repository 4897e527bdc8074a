package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// injectionPlaybook passes a webhook field to an input that a shell
// command interpolates, the way issue 28 found a shell could be had.
const injectionPlaybook = `version: 1
name: greet
inputs:
  who: {type: string}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs:
      who: ${{ trigger.hook.recipientNo }}
steps:
  - id: hi
    uses: shell
    with:
      command: echo hello ${{ inputs.who }} > greeting.txt
`

const injectedValue = "1; touch pwned; echo"

// TestAShellCommandPrintsAnInputAsData: runbook run -i with a value
// written to run a command prints it, and the command never runs; plan
// shows the variable and its value.
func TestAShellCommandPrintsAnInputAsData(t *testing.T) {
	c := newCLI(t)
	c.file("greet.yaml", injectionPlaybook)

	r := c.run("validate", "greet.yaml")
	require.Equal(t, 0, r.code, r.String())

	r = c.run("plan", "greet.yaml", "-i", "who="+injectedValue)
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, `command: echo hello "${RB_INPUTS_WHO}" > greeting.txt`)
	assert.Contains(t, r.stdout, `"RB_INPUTS_WHO":"`+injectedValue+`"`)

	r = c.run("run", "greet.yaml", "-i", "who="+injectedValue)
	require.Equal(t, 0, r.code, r.String())
	got, err := os.ReadFile(filepath.Join(c.dir, "greeting.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello "+injectedValue+"\n", string(got))
	assert.NoFileExists(t, filepath.Join(c.dir, "pwned"), "the input ran as shell code")
}

// TestASignedWebhookFieldReachesTheShellAsData: a signed delivery whose
// recipientNo holds shell code is answered, its run succeeds, the field is
// printed as written and nothing it names runs.
func TestASignedWebhookFieldReachesTheShellAsData(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/greet.yaml", injectionPlaybook)
	c.file("runbook.yaml", "webhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret")
	s := c.serve()

	body, _ := json.Marshal(map[string]any{
		"hooksId": "inj-1", "webhookConfigId": "cfg-1", "productName": "SMS", "appKey": "app-1", "event": "UNSUBSCRIBE",
		"hooks": []map[string]any{{"hookId": "inj-1-h0", "recipientNo": injectedValue, "unsubscribeNo": "0801234567"}},
	})
	req, _ := http.NewRequest("POST", s.url+"/hooks/sms", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	greeting := filepath.Join(c.dir, "playbooks", "greeting.txt")
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(greeting)
		if err == nil && strings.HasSuffix(string(got), "\n") {
			assert.Equal(t, "hello "+injectedValue+"\n", string(got))
			break
		}
		require.True(t, time.Now().Before(deadline), "no greeting 30s after the delivery:\n%s", s.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
	_, runs := s.api(t, "GET", "/api/v1/runs", nil)
	require.NotEmpty(t, runs["runs"], "%v", runs)
	for _, dir := range []string{c.dir, filepath.Join(c.dir, "playbooks")} {
		assert.NoFileExists(t, filepath.Join(dir, "pwned"), "the webhook field ran as shell code")
	}
}
