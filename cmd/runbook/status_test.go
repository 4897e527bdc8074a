package main

import (
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
