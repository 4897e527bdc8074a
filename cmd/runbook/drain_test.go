package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// holdPlaybook executes a shell step that waits for the file dir/gate,
// then appends a line to dir/held.txt.
func holdPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: hold
steps:
  - {id: wait, uses: shell, with: {command: "while [ ! -e %[1]s/gate ]; do sleep 0.02; done; echo held >> %[1]s/held.txt"}}
`, dir)
}

// drainOf reads GET /api/v1/drain.
func drainOf(t *testing.T, s *serveProc) map[string]any {
	t.Helper()
	code, m := s.api(t, "GET", "/api/v1/drain", nil)
	require.Equal(t, 200, code, m)
	return m
}

func readyz(t *testing.T, s *serveProc) int {
	t.Helper()
	resp, err := http.Get(s.url + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// SIGUSR1 drains a server alone on its store: /readyz and run starts
// answer 503, the run parked on an approval is let go (it stays in the
// store), the run executing ends, and the drain then says the server is
// empty. The next process resumes the parked run, whose approval then
// finishes it.
func TestSIGUSR1DrainsAServerAndTheNextStartResumesWhatItLetGo(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/gated.yaml", approvalPlaybook)
	c.file("playbooks/hold.yaml", holdPlaybook(c.dir))
	s := c.serve()
	code, m := s.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	gated := m["id"].(string)
	code, m = s.api(t, "POST", "/api/v1/playbooks/hold/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	held := m["id"].(string)
	require.Eventually(t, func() bool {
		_, g := s.api(t, "GET", "/api/v1/runs/"+gated, nil)
		_, h := s.api(t, "GET", "/api/v1/runs/"+held, nil)
		return g["status"] == "waiting" && h["status"] == "running"
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, false, drainOf(t, s)["draining"])

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGUSR1))
	require.Eventually(t, func() bool { return drainOf(t, s)["draining"] == true }, 5*time.Second, 10*time.Millisecond)
	d := drainOf(t, s)
	assert.Equal(t, float64(1), d["executing"], "%v", d)
	assert.Equal(t, float64(1), d["let_go"], "the parked run: %v", d)
	assert.Equal(t, false, d["empty"])
	assert.Equal(t, "signal SIGUSR1", d["by"])
	assert.Equal(t, 503, readyz(t, s))
	code, m = s.api(t, "POST", "/api/v1/playbooks/hold/runs", map[string]any{})
	assert.Equal(t, 503, code, "a run start while draining: %v", m)
	assert.Contains(t, m["error"], "draining")

	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	require.Eventually(t, func() bool { return drainOf(t, s)["empty"] == true }, 10*time.Second, 20*time.Millisecond)
	_, h := s.api(t, "GET", "/api/v1/runs/"+held, nil)
	assert.Equal(t, "succeeded", h["status"], "the run executing finished")
	s.stop(t)
	// Read once the process exited: the line is logged just after the
	// drain says empty, and the test read it in between under load.
	assert.Contains(t, s.stderr.String(), "drained: nothing executes here any more")

	s = c.serve()
	code, m = s.api(t, "POST", "/api/v1/runs/"+gated+"/approve", map[string]any{"approve": true, "step": "gate", "by": "alice", "fields": map[string]any{"ticket": 7}})
	require.Equal(t, 200, code, m)
	require.Eventually(t, func() bool {
		_, g := s.api(t, "GET", "/api/v1/runs/"+gated, nil)
		return g["status"] == "succeeded"
	}, 10*time.Second, 20*time.Millisecond, "the run let go is resumed by the next process")
	b, err := os.ReadFile(filepath.Join(c.dir, "held.txt"))
	require.NoError(t, err)
	assert.Equal(t, "held\n", string(b), "the held step ran once")
}

// POST /api/v1/drain on one of two replicas hands its parked run over to
// the other at once (an approval answered there finishes it), suspends
// the run still executing when the grace ends (the other takes it over
// and finishes it, each step once), says it is empty, and is audited
// with its reason.
func TestADrainedReplicaHandsItsRunsOverToTheOther(t *testing.T) {
	c, rs, st := twoReplicas(t, 2)
	c.file("playbooks/hold.yaml", holdPlaybook(c.dir))
	a, b := rs.proc[0], rs.proc[1]
	for _, p := range []*serveProc{a, b} {
		code, m := p.api(t, "POST", "/api/v1/reload", map[string]any{})
		require.Equal(t, 200, code, m)
	}
	code, m := a.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	gated := m["id"].(string)
	code, m = a.api(t, "POST", "/api/v1/playbooks/hold/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	held := m["id"].(string)
	waitStatus(t, st, gated, state.RunWaiting, 10*time.Second)
	waitStatus(t, st, held, state.RunRunning, 10*time.Second)

	code, m = a.api(t, "POST", "/api/v1/drain", map[string]any{"grace": "1s", "reason": "upgrade to v2"})
	require.Equal(t, 202, code, m)
	assert.Equal(t, true, m["draining"])
	code, m = a.api(t, "POST", "/api/v1/drain", map[string]any{})
	assert.Equal(t, 200, code, "a second drain request answers the drain under way: %v", m)

	require.Eventually(t, func() bool {
		r, err := st.GetRun(t.Context(), gated)
		return err == nil && sameOwner(rs.owner(1), r.Owner)
	}, 10*time.Second, 20*time.Millisecond, "B takes the parked run at once")
	code, m = b.api(t, "POST", "/api/v1/runs/"+gated+"/approve", map[string]any{"approve": true, "step": "gate", "by": "alice", "fields": map[string]any{"ticket": 7}})
	require.Equal(t, 200, code, m)
	waitStatus(t, st, gated, state.RunSucceeded, 10*time.Second)

	require.Eventually(t, func() bool { return drainOf(t, a)["empty"] == true }, 15*time.Second, 20*time.Millisecond)
	d := drainOf(t, a)
	assert.Equal(t, float64(1), d["handed_over"], "%v", d)
	assert.Equal(t, float64(1), d["suspended"], "the run executing past the grace: %v", d)
	require.Eventually(t, func() bool {
		r, err := st.GetRun(t.Context(), held)
		return err == nil && sameOwner(rs.owner(1), r.Owner)
	}, 10*time.Second, 20*time.Millisecond, "B takes the suspended run over")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	waitStatus(t, st, held, state.RunSucceeded, 10*time.Second)
	b2, err := os.ReadFile(filepath.Join(c.dir, "held.txt"))
	require.NoError(t, err)
	assert.Equal(t, "held\n", string(b2), "the step cut by the suspension ran to its end once")

	code, m = b.api(t, "GET", "/api/v1/audit", nil)
	require.Equal(t, 200, code, m)
	var found bool
	for _, rec := range m["records"].([]any) {
		r := rec.(map[string]any)
		if r["action"] == "server.drain" && strings.Contains(fmt.Sprint(r["detail"]), "upgrade to v2") {
			found = true
			assert.Equal(t, "ok", r["result"])
		}
	}
	assert.True(t, found, "the drain is audited with its reason: %v", m["records"])
	assert.Eventually(t, func() bool { return strings.Contains(a.stderr.String(), "drained: nothing executes here any more") },
		5*time.Second, 20*time.Millisecond, "logged just after the drain says empty")
}

// runbook drain drains the server named by --server through its API:
// it prints the drain, --status reads it, and --wait follows it until
// nothing executes there, then exits 0.
func TestRunbookDrainDrainsTheServerAndWaitsUntilItIsEmpty(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/hold.yaml", holdPlaybook(c.dir))
	s := c.serve()
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	code, m := s.api(t, "POST", "/api/v1/playbooks/hold/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	held := m["id"].(string)
	require.Eventually(t, func() bool {
		_, h := s.api(t, "GET", "/api/v1/runs/"+held, nil)
		return h["status"] == "running"
	}, 10*time.Second, 20*time.Millisecond)

	r := c.run("drain", "--status", "--server", s.url)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, "not draining\n", r.stdout)
	r = c.run("drain", "--server", s.url, "--reason", "upgrade to v2", "--grace", "5m")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "draining — executing 1, let go 0 (handed over 0), suspended 0", r.stdout)
	assert.Contains(t, r.stdout, "grace 5m0s")
	assert.Equal(t, 503, readyz(t, s))

	done := make(chan result, 1)
	go func() { done <- c.run("drain", "--wait", "--status", "--server", s.url) }()
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("runbook drain --wait did not return once the server was empty")
	}
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "draining — executing 1", "the progress while the run executes: %s", r.stdout)
	assert.Contains(t, r.stdout, "drained: nothing executes there any more; stop it now (SIGTERM)", r.stdout)
	_, h := s.api(t, "GET", "/api/v1/runs/"+held, nil)
	assert.Equal(t, "succeeded", h["status"])
	r = c.run("audit", "--server", s.url, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"server.drain"`)
	assert.Contains(t, r.stdout, "upgrade to v2")
}
