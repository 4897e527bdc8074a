package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const standardPlaybook = `version: 1
name: on-invoice
inputs:
  invoice: {type: string}
triggers:
  - webhook:
      route: billing
      if: trigger.payload.type == "invoice.paid"
    inputs:
      invoice: ${{ trigger.payload.data.id }}
steps:
  - id: note
    uses: log
    with: {message: "paid ${{ inputs.invoice }}"}
`

// TestServeReceivesStandardWebhooks posts signed Standard Webhooks
// deliveries to a real runbook serve: a good one starts its run, the same
// webhook-id again is a duplicate answered with the first run, a rotated
// old key still verifies, and a bad signature, a stale timestamp or a
// missing header are refused 401 with no run.
func TestServeReceivesStandardWebhooks(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/on-invoice.yaml", standardPlaybook)
	c.file("runbook.yaml", "webhooks:\n  routes:\n    billing: {verify: standard-webhooks, secret: BILLING_KEY, secrets: [BILLING_OLD_KEY]}\n")
	newKey, oldKey := []byte("new-key-0123456789abcdef"), []byte("old-key-0123456789abcdef")
	c.env = append(c.env, "BILLING_KEY=whsec_"+base64.StdEncoding.EncodeToString(newKey),
		"BILLING_OLD_KEY=whsec_"+base64.StdEncoding.EncodeToString(oldKey))
	s := c.serve()

	post := func(id string, ts time.Time, key []byte, body string, drop string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.url+"/hooks/billing", bytes.NewBufferString(body))
		require.NoError(t, err)
		unix := strconv.FormatInt(ts.Unix(), 10)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + unix + "." + body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", unix)
		req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		if drop != "" {
			req.Header.Del(drop)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(b, &doc), string(b))
		return resp.StatusCode, doc
	}
	paid := `{"type":"invoice.paid","data":{"id":"in_1"}}`

	code, first := post("msg_1", time.Now(), newKey, paid, "")
	require.Equal(t, http.StatusOK, code, first)
	assert.Equal(t, "accepted", first["status"])
	runs, _ := first["runs"].([]any)
	require.Len(t, runs, 1, first)

	code, again := post("msg_1", time.Now(), newKey, paid, "")
	require.Equal(t, http.StatusOK, code, again)
	assert.Equal(t, "duplicate", again["status"], "the webhook-id is the dedup key")
	assert.Equal(t, first["runs"], again["runs"], "a duplicate answers with the first run")

	code, rotated := post("msg_2", time.Now(), oldKey, `{"type":"invoice.paid","data":{"id":"in_2"}}`, "")
	assert.Equal(t, http.StatusOK, code, rotated)
	assert.Equal(t, "accepted", rotated["status"], "a key of secrets: still verifies during a rotation")

	code, other := post("msg_3", time.Now(), newKey, `{"type":"invoice.created","data":{"id":"in_3"}}`, "")
	assert.Equal(t, http.StatusOK, code, other)
	assert.Empty(t, other["runs"], "the trigger's if decides")

	for name, tc := range map[string]struct {
		ts   time.Time
		key  []byte
		drop string
	}{
		"a signature under another key": {time.Now(), []byte("not-the-key"), ""},
		"a timestamp 10 minutes old":    {time.Now().Add(-10 * time.Minute), newKey, ""},
		"no webhook-id header":          {time.Now(), newKey, "webhook-id"},
	} {
		code, doc := post("msg_bad", tc.ts, tc.key, paid, tc.drop)
		assert.Equal(t, http.StatusUnauthorized, code, "%s: %v", name, doc)
	}

	id, _ := runs[0].(string)
	require.NotEmpty(t, id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, run := s.api(t, http.MethodGet, "/api/v1/runs/"+id, nil)
		if run["status"] == "succeeded" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run finishes: %v", run)
		time.Sleep(50 * time.Millisecond)
	}
	_, list := s.api(t, http.MethodGet, "/api/v1/runs?playbook=on-invoice", nil)
	all, _ := list["runs"].([]any)
	assert.Len(t, all, 2, "in_1 and in_2 started a run each; nothing else did")
}
