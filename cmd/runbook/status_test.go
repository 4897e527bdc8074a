package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under serve a run waits for its approval in the server's process; the
// runs verbs show it waiting, not running, and running no more once
// answered.
func TestAServedRunWaitingForApprovalIsListedWaiting(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePlaybooks(t)
	s := c.serveRuns(t)
	id := c.startGated(t, s)
	require.Eventually(t, func() bool {
		r := c.run("runs", "list", "--status", "waiting")
		return r.code == 0 && strings.Contains(r.stdout, id)
	}, 10*time.Second, 50*time.Millisecond, "the run is listed waiting")
	r := c.run("runs", "show", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "  status:    waiting\n")
	r = c.run("runs", "list", "--status", "running")
	assert.NotContains(t, r.stdout, id)

	r = c.run("runs", "approve", id, "gate", "--by", "alice", "--field", "ticket=42")
	require.Equal(t, 0, r.code, r)
	r = c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "  status:    succeeded\n")
}

// A run whose process was killed (kill -9) is interrupted, with the
// command that continues it, never running: the state file's lock says
// no process executes it any more.
func TestAKilledRunIsInterruptedWithTheCommandThatResumesIt(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pb := c.file("crash.yaml", crashPlaybook)
	cmd, id := c.startUntil("step nap started", "run", pb)
	require.NotEmpty(t, id)
	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()

	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	line := lineWith(r.stdout, id)
	assert.Contains(t, line, "interrupted", r.stdout)
	assert.NotContains(t, line, "running")
	assert.NotContains(t, line, "…", "no duration that keeps growing")
	r = c.run("runs", "list", "--status", "running")
	assert.NotContains(t, r.stdout, id, "a dead process's run is never listed running")
	r = c.run("runs", "list", "--status", "interrupted")
	assert.Contains(t, r.stdout, id)
	r = c.run("runs", "show", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "  status:    interrupted\n")
	assert.Contains(t, r.stdout, "continue it with: runbook run --resume "+id+"\n")
	r = c.run("runs", "show", id, "--output", "json")
	assert.Contains(t, r.stdout, `"status": "interrupted"`)

	r = c.run("run", "--resume", id)
	require.Equal(t, 0, r.code, r)
	r = c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "  status:    succeeded\n")
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
