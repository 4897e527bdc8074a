package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runs show of a run queued on a concurrency key under serve says so (and
// that it goes on by itself), not that it waits for an approval.
func TestRunsShowSaysARunIsQueuedOnAKey(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Join(c.dir, "playbooks")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for _, name := range []string{"first", "second"} {
		c.file("playbooks/"+name+".yaml", "version: 1\nname: "+name+"\nconcurrency: {key: db-maintenance}\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 1h}}\n")
	}
	s := c.serve("--playbooks", dir)
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	code, first := s.api(t, "POST", "/api/v1/playbooks/first/runs", map[string]any{})
	require.Equal(t, 201, code, first)
	code, second := s.api(t, "POST", "/api/v1/playbooks/second/runs", map[string]any{})
	require.Equal(t, 201, code, second)

	// Started together, either may take the key first: the other queues.
	id := ""
	deadline := time.Now().Add(10 * time.Second)
	for id == "" {
		for _, created := range []map[string]any{first, second} {
			_, run := s.api(t, "GET", "/api/v1/runs/"+created["id"].(string), nil)
			if run["queued_on_key"] == "db-maintenance" {
				id = run["id"].(string)
			}
		}
		require.True(t, id != "" || time.Now().Before(deadline), "neither run queued on the key within 10 s")
		time.Sleep(20 * time.Millisecond)
	}
	r := c.run("runs", "show", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `queued on concurrency key "db-maintenance", held by another run; it goes on by itself when the key is released`)
	assert.NotContains(t, r.stdout, "approval")
}
