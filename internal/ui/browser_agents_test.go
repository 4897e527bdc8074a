package ui_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browserOnAgent's step runs on an agent with role=web: it prints its
// agent's name, then waits for the gate file beside the playbook.
const browserOnAgent = `version: 1
name: ui-agent
steps:
  - id: tick
    uses: shell
    runs_on: {labels: {role: web}}
    with: {command: 'echo "tick on $AGENT_NAME"; while [ ! -e gate ]; do sleep 0.05; done; echo tock'}
`

// The Agents page in a real Chromium against a real runbook serve and a
// real runbook agent: it lists the agent with its labels, its running
// attempt (linked to its run), capacity and limit; the run's page shows,
// while the step runs, the line it printed on the agent and which agent
// runs it.
func TestBrowserAgentsPageShowsEachAgentAndWhatItRuns(t *testing.T) {
	chromium(t)
	srv := startServe(t, map[string]string{"ui-agent.yaml": browserOnAgent})
	tok := exec.Command(srv.bin, "token", "create", "web-1", "--role", "agent", "--server", srv.url)
	tok.Env = append(os.Environ(), "RUNBOOK_API_TOKEN="+token)
	out, err := tok.Output()
	require.NoError(t, err, "runbook token create: %s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	agent := exec.Command(srv.bin, "agent", "--server", srv.url, "--name", "web-1", "--labels", "role=web,zone=a",
		"--capacity", "2", "--limit", "ui-agent*=1", "-v")
	agent.Dir = srv.dir // the step's gate file is beside the playbook
	agent.Env = append(os.Environ(), "RUNBOOK_AGENT_TOKEN="+lines[len(lines)-1], "AGENT_NAME=web-1")
	log := &lockedBuffer{b: &bytes.Buffer{}}
	agent.Stderr = log
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Signal(syscall.SIGTERM); _ = agent.Wait() })

	b := newBrowser(t, srv.url)
	b.open("/agents")
	b.waitFor(`input[name="token"]`)
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.SetValue(chromedp.CSS("#name"), "ops-alice"),
		chromedp.Submit(chromedp.CSS("#token")))
	deadline := time.Now().Add(20 * time.Second)
	for b.count("#agents tr[data-key]") == 0 {
		require.True(t, time.Now().Before(deadline), "the agent registers and the page lists it; its log:\n%s", log.String())
		time.Sleep(200 * time.Millisecond)
		b.open("/agents")
		b.waitFor("#agents")
	}
	row := b.text("#agents tr[data-key]")
	for _, want := range []string{"web-1", "role=web", "zone=a", "0/2", "ui-agent* 0/1"} {
		assert.Contains(t, row, want)
	}

	b.open("/playbooks/ui-agent")
	b.waitFor("#start-form button")
	b.do(chromedp.Click(chromedp.CSS("#start-form button")))
	b.waitFor("#run-title")
	runPath := b.eval(`location.pathname`)
	require.True(t, strings.HasPrefix(runPath, "/runs/"), runPath)
	runID := strings.TrimPrefix(runPath, "/runs/")
	b.waitFor("#output-tick")
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(b.text("#output-tick"), "tick on web-1") {
		require.True(t, time.Now().Before(deadline), "the line printed on the agent shows on the run's page while the step runs: %q", b.text("#output-tick"))
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(b.content("#log-tick"), "running on agent web-1") {
		require.True(t, time.Now().Before(deadline), "the step's log says which agent runs it while it runs: %q", b.content("#log-tick"))
		time.Sleep(200 * time.Millisecond)
		b.open(runPath)
		b.waitFor("#run-title")
	}
	b.shot("run-on-agent")

	b.open("/agents")
	b.waitFor("#agents tr[data-key]")
	row = b.text("#agents tr[data-key]")
	assert.Contains(t, row, "1/2", "its attempt is running")
	assert.Contains(t, row, "ui-agent* 1/1", "and counts against its limit")
	assert.Contains(t, row, runID+" tick")
	b.shot("agents")
	b.do(chromedp.Click(chromedp.CSS(`#agents a[href="` + runPath + `"]`)))
	b.waitFor("#run-title")
	assert.Equal(t, runPath, b.path(), "the running attempt links to its run")

	require.NoError(t, os.WriteFile(filepath.Join(srv.dir, "gate"), nil, 0o600))
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(b.text(`[data-region="head"]`), "succeeded") {
		require.True(t, time.Now().Before(deadline), "the run succeeds: %s", b.text(`[data-region="head"]`))
		time.Sleep(200 * time.Millisecond)
		b.open(runPath)
		b.waitFor("#run-title")
	}
	assert.Contains(t, b.content("#log-tick"), "running on agent web-1", "the step's log says which agent ran it")
	assert.Contains(t, b.content("#output-tick"), "tock")
	b.shot("run-on-agent-done")
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
