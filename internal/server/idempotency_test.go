package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A run start sent again with the same Idempotency-Key (its answer lost
// to a dropped connection, say) answers the run the first one started,
// 200 and Idempotent-Replayed, and starts no second run; another key
// starts another run; a key that is not a header token is refused.
func TestAStartSentAgainWithItsIdempotencyKeyStartsOneRun(t *testing.T) {
	e := newEnv(t, map[string]string{"note.yaml": `version: 1
name: note
steps:
  - {id: a, uses: log, with: {message: hi}}
`})
	start := func(key string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest("POST", e.url+"/api/v1/playbooks/note/runs", bytes.NewReader([]byte(`{"inputs":{}}`)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		id, _ := m["id"].(string)
		return resp.StatusCode, resp.Header, id
	}
	code, _, first := start("order-7")
	require.Equal(t, http.StatusCreated, code)
	require.NotEmpty(t, first)
	code, h, again := start("order-7")
	assert.Equal(t, http.StatusOK, code, "sent again: the first start's run")
	assert.Equal(t, first, again)
	assert.Equal(t, "true", h.Get("Idempotent-Replayed"))
	assert.Equal(t, "/api/v1/runs/"+first, h.Get("Location"))
	e.waitStatus(first, state.RunSucceeded)

	code, _, other := start("order-8")
	assert.Equal(t, http.StatusCreated, code)
	assert.NotEqual(t, first, other)
	e.waitStatus(other, state.RunSucceeded)

	code, _, _ = start("two words")
	assert.Equal(t, http.StatusBadRequest, code)

	e.stop()
	st, err := bolt.Open(e.state, bolt.Options{})
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), state.RunFilter{Playbook: "note"})
	require.NoError(t, err)
	assert.Len(t, runs, 2, "one run per key")
}
