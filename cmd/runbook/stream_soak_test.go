//go:build soak

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunsLogsFollowsARunForMinutes: with the listener's default timeouts
// (read 30 s, write 60 s), `runbook runs logs -f` follows a run that
// prints for over two minutes to its end, every line included.
func TestRunsLogsFollowsARunForMinutes(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/slow.yaml", `version: 1
name: slow
steps:
  - id: tick
    uses: shell
    with: {command: "for i in $(seq 1 14); do echo tick $i; sleep 10; done"}
`)
	s := c.serve()
	code, run := s.api(t, "POST", "/api/v1/playbooks/slow/runs", map[string]any{})
	require.Equal(t, 201, code, "%v", run)
	id := run["id"].(string)
	start := time.Now()
	c.env = append(c.env, "RUNBOOK_SERVER="+s.url, "RUNBOOK_API_TOKEN="+serveToken)
	r := c.run("runs", "logs", "-f", id)
	took := time.Since(start)
	require.Equal(t, 0, r.code, "after %s: %s", took, r)
	assert.Greater(t, took, 2*time.Minute)
	for i := 1; i <= 14; i++ {
		assert.Contains(t, r.stdout, fmt.Sprintf("tick %d\n", i))
	}
	assert.True(t, strings.Contains(r.stdout, "succeeded"), r.stdout)
}
