package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const loggedHookPlaybook = `version: 1
name: on-unsubscribe
inputs:
  number: {type: string, required: true}
triggers:
  - webhook:
      route: sms
      event: UNSUBSCRIBE
      each: hook
    inputs:
      number: ${{ trigger.hook.recipientNo }}
steps:
  - id: add
    uses: log
    with: {message: "suppress ${{ inputs.number }}"}
`

// serve -v says in its log what an operator looks for: each
// webhook delivery with the runs it started, each run's end, and a refused
// reload one problem a line.
func TestServeLogsDeliveriesRunEndsAndReloadProblemsAsLines(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/on-unsubscribe.yaml", loggedHookPlaybook)
	c.file("runbook.yaml", "server: {reload: false}\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n")
	c.env = append(c.env, "SMS_WEBHOOK_SECRET=hook-secret")
	s := c.serve("-v")
	client := &http.Client{Timeout: 10 * time.Second}

	d := makeDeliveries(2)[1] // two hooks
	require.Equal(t, http.StatusOK, s.post(client, d, "hook-secret"))
	require.Equal(t, http.StatusOK, s.post(client, d, "hook-secret"), "a redelivery")
	require.Equal(t, http.StatusUnauthorized, s.post(client, d, "wrong"))

	// A delivery is logged once answered: the lines may follow the answers.
	require.Eventually(t, func() bool {
		out := s.stderrText()
		return strings.Count(out, `msg="run ended"`) >= 2 && strings.Contains(out, `msg="webhook delivery refused"`) &&
			strings.Contains(out, `outcome=duplicate`)
	}, 10*time.Second, 20*time.Millisecond, "two runs end, three deliveries are logged:\n%s", s.stderrText())
	out := s.stderrText()
	assert.Regexp(t, `level=INFO msg="webhook delivery" route=sms code=200 outcome=accepted runs=\d{8}T\d{6}-[0-9a-f]{6},\d{8}T\d{6}-[0-9a-f]{6}`, out)
	assert.Regexp(t, `level=INFO msg="webhook delivery" route=sms code=200 outcome=duplicate`, out)
	assert.Regexp(t, `level=WARN msg="webhook delivery refused" route=sms code=401 err=`, out)
	assert.Regexp(t, `level=INFO msg="run ended" run_id=\S+ status=succeeded playbook=on-unsubscribe duration=`, out)
	assert.NotContains(t, out, "hook-secret", "the route's secret never reaches the log")

	c.file("playbooks/bad.yaml", "version: 1\nname: bad\nsteps:\n  - {id: x, uses: nope}\n  - {id: y, uses: nope2}\n")
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return strings.Contains(s.stderrText(), "reload refused")
	}, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return len(regexp.MustCompile(`(?m)^.*msg="reload problem" problem=".*bad\.yaml:\d+:\d+: [^\n]*"$`).FindAllString(s.stderrText(), -1)) == 2
	}, 5*time.Second, 20*time.Millisecond, "one line per problem:\n%s", s.stderrText())
	assert.Regexp(t, `msg="reload refused: the playbooks in use are kept" dir=\S+ problems=2\n`, s.stderrText())
	s.stop(t)
}

// stderrText reads what the server wrote to stderr so far, under the lock
// its writes take.
func (s *serveProc) stderrText() string {
	lw := s.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return s.stderr.String()
}
