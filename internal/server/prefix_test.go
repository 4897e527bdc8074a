package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func TestListRunsByIDPrefix(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.db")
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i, id := range []string{"20261122T100000-aaaa01", "20261122T100000-aaaa02", "20261122T100000-bbbb01", "20261122T100001-cccc01"} {
		require.NoError(t, store.CreateRun(context.Background(), &state.Run{
			ID: id, Playbook: "pb", Hash: "h", Status: state.RunSucceeded, CreatedAt: created.Add(time.Duration(i) * time.Millisecond),
		}))
	}
	require.NoError(t, store.Close())
	e := start(t, t.TempDir(), statePath, nil)

	ids := func(path string) []string {
		t.Helper()
		r := e.api("GET", path, nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var out []string
		for _, run := range r.json(t)["runs"].([]any) {
			out = append(out, run.(map[string]any)["id"].(string))
		}
		return out
	}
	t.Run("only the runs whose ID starts with the prefix are listed, newest first", func(t *testing.T) {
		assert.Equal(t, []string{"20261122T100000-aaaa02", "20261122T100000-aaaa01"}, ids("/api/v1/runs?prefix=20261122T100000-aaaa"))
	})
	t.Run("the limit applies to the matching runs", func(t *testing.T) {
		assert.Equal(t, []string{"20261122T100000-bbbb01", "20261122T100000-aaaa02"}, ids("/api/v1/runs?prefix=20261122T100000&limit=2"))
	})
	t.Run("a prefix nothing matches lists no run", func(t *testing.T) {
		assert.Empty(t, ids("/api/v1/runs?prefix=2025"))
	})
}
