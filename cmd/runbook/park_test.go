package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run that runbook serve parked on a long sleep is shown waiting until
// the sleep's end, with nothing to approve; an answer is refused.
func TestRunsShowSaysWhenAParkedSleepGoesOn(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/nap.yaml", "version: 1\nname: nap\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 1h}}\n")
	s := c.serveRuns(t)
	code, m := s.api(t, "POST", "/api/v1/playbooks/nap/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	id := m["id"].(string)
	require.Eventually(t, func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+id, nil)
		return m["status"] == "waiting"
	}, 10*time.Second, 10*time.Millisecond)

	r := c.run("runs", "show", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "  status:    waiting\n")
	assert.Contains(t, r.stdout, "(a sleep, or a task's next poll); it goes on by itself\n")
	assert.NotContains(t, r.stdout, "runs approve")

	r = c.run("runs", "approve", id, "nap")
	assert.NotEqual(t, 0, r.code, r)
	assert.Contains(t, r.stderr, "is not an approval: it waits until")
}
