package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// passwordPlaybook succeeds only with the secret input pw = open-sesame and
// appends "hello NAME" to dir/greet.txt.
func passwordPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: greet
inputs:
  name: {type: string, required: true}
  pw: {type: string, secret: true, required: true}
steps:
  - {id: check, uses: shell, with: {command: 'test "${{ inputs.pw }}" = open-sesame && echo "hello ${{ inputs.name }}" >> %s'}}
`, filepath.Join(dir, "greet.txt"))
}

// apiRun reads a run through a server's API.
func apiRun(t *testing.T, s *serveProc, id string) api.Run {
	t.Helper()
	code, m := s.api(t, "GET", "/api/v1/runs/"+id, nil)
	require.Equal(t, 200, code, m)
	b, _ := json.Marshal(m)
	var r api.Run
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

func (c *cli) greetLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "greet.txt"))
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// runs rerun through the real binary and one runbook serve on a state
// file: a succeeded run runs again with its inputs, its secret input given
// again (refused without it, naming it), recorded as a rerun of it by the
// caller in runs show, the API and the audit log, the secret never shown;
// a cancelled run runs again too, an unfinished one does not; without a
// server the rerun runs in the CLI's process.
func TestRunsRerunStartsAnEndedRunAgainWithItsInputs(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/greet.yaml", passwordPlaybook(c.dir))
	c.file("playbooks/gated.yaml", approvalPlaybook)
	secret := c.operatorToken(t)
	s := c.serveRuns(t)
	admin := append([]string(nil), c.env...)
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)

	code, m := s.api(t, "POST", "/api/v1/playbooks/greet/runs", map[string]any{"inputs": map[string]any{"name": "ada", "pw": "open-sesame"}})
	require.Equal(t, 201, code, m)
	first := m["id"].(string)
	waitFor(t, 15*time.Second, "the first run succeeds", func() bool { return apiRun(t, s, first).Status == state.RunSucceeded })

	r := c.run("runs", "rerun", first)
	assert.Equal(t, 2, r.code, "a rerun without the secret input is refused: %s", r)
	assert.Contains(t, r.stderr, "secret input pw")
	assert.Contains(t, r.stderr, "-i pw=VALUE")

	r = c.run("runs", "rerun", first, "-i", "pw=open-sesame", "--wait")
	require.Equal(t, 0, r.code, r)
	assert.NotContains(t, r.stdout+r.stderr, "open-sesame")
	again := apiRun(t, s, runIDOf(t, r.stdout))
	require.NotEqual(t, first, again.ID)
	assert.Equal(t, state.RunSucceeded, again.Status)
	assert.Equal(t, first, again.RerunOf)
	assert.Equal(t, "ada", again.Inputs["name"])
	assert.Equal(t, "***", again.Inputs["pw"], "the secret input is masked in the API answer")
	assert.Equal(t, "alice", again.StartedBy())
	assert.Equal(t, []string{"hello ada", "hello ada"}, c.greetLines(t), "the rerun ran the step with the inputs, the secret included")
	r = c.run("runs", "show", again.ID)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "rerun of:  "+first)

	// A cancelled run runs again; an unfinished one does not.
	code, m = s.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	gated := m["id"].(string)
	waitFor(t, 15*time.Second, "the gated run waits", func() bool { return apiRun(t, s, gated).Status == state.RunWaiting })
	r = c.run("runs", "rerun", gated)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "is waiting; only a run that ended")
	r = c.run("runs", "cancel", gated)
	require.Equal(t, 0, r.code, r)
	waitFor(t, 15*time.Second, "the gated run is cancelled", func() bool { return apiRun(t, s, gated).Status == state.RunCancelled })
	r = c.run("runs", "rerun", gated)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "runs run "+gated+" again")
	regated := runIDOf(t, r.stdout)
	waitFor(t, 15*time.Second, "the rerun of the cancelled run waits at its approval", func() bool { return apiRun(t, s, regated).Status == state.RunWaiting })
	assert.Equal(t, gated, apiRun(t, s, regated).RerunOf)

	c.env = admin
	r = c.run("audit", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var recs []state.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	var reruns []string
	for _, rec := range recs {
		if rec.Action == "run.rerun" && rec.Result == "ok" {
			assert.Equal(t, "alice", rec.Identity)
			reruns = append(reruns, rec.Target+" -> "+rec.Detail["run"].(string))
		}
	}
	assert.Equal(t, []string{"run:" + gated + " -> " + regated, "run:" + first + " -> " + again.ID}, reruns)
	assert.NotContains(t, r.stdout, "open-sesame")

	// Without a server the rerun runs here.
	s.stop(t)
	r = c.run("runs", "rerun", first, "-i", "pw=open-sesame")
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, []string{"hello ada", "hello ada", "hello ada"}, c.greetLines(t))
	r = c.run("runs", "show", runIDOf(t, r.stdout))
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "rerun of:  "+first)
	assert.Contains(t, r.stdout, "status:    succeeded")
}

// runs rerun across two replicas on PostgreSQL: a run executed through
// replica A runs again through replica B (--wait follows it there), with
// its inputs and its secret given again, recorded as a rerun by the
// caller and audited.
func TestRunsRerunAcrossTwoReplicas(t *testing.T) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/greet.yaml", passwordPlaybook(c.dir))
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s}\n", replicaLease))
	secret := c.operatorToken(t)
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks")}, proc: make([]*serveProc, 2), host: host}
	rs.start(0)
	rs.start(1)
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)

	code, m := rs.proc[0].api(t, "POST", "/api/v1/playbooks/greet/runs", map[string]any{"inputs": map[string]any{"name": "bob", "pw": "open-sesame"}})
	require.Equal(t, 201, code, m)
	first := m["id"].(string)
	waitStatus(t, st, first, state.RunSucceeded, 20*time.Second)

	r := c.run("runs", "rerun", first, "-i", "pw=open-sesame", "--wait", "--server", rs.url(1))
	require.Equal(t, 0, r.code, r)
	again := waitStatus(t, st, runIDOf(t, r.stdout), state.RunSucceeded, 20*time.Second)
	assert.Equal(t, first, again.RerunOf())
	assert.Equal(t, "alice", again.StartedBy())
	assert.Equal(t, "bob", again.Inputs["name"])
	assert.Equal(t, []string{"hello bob", "hello bob"}, c.greetLines(t))

	recs, err := st.Audit(t.Context(), state.AuditFilter{})
	require.NoError(t, err)
	n := 0
	for _, rec := range recs {
		if rec.Action == "run.rerun" {
			n++
			assert.Equal(t, "alice", rec.Identity)
			assert.Equal(t, "run:"+first, rec.Target)
			assert.Equal(t, again.ID, rec.Detail["run"])
		}
	}
	assert.Equal(t, 1, n)
}
