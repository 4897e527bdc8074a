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

// freezePlaybook's first step appends a line to dir/first.log and waits
// for dir/gate; its second appends to dir/second.log: the logs count each
// step's executions.
func freezePlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: freeze-upgrade
labels: {team: platform}
steps:
  - {id: first, uses: shell, with: {command: "echo run >> %[1]s/first.log; while [ ! -e %[1]s/gate ]; do sleep 0.02; done"}}
  - {id: second, uses: shell, with: {command: "echo run >> %[1]s/second.log"}}
`, dir)
}

// countLines counts the lines of dir/name (0 when it does not exist).
func countLines(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}

// auditOf lists "action target result identity" of the audit records of
// the runs pauses, through a server's API.
func auditOf(t *testing.T, s *serveProc) []string {
	t.Helper()
	code, m := s.api(t, "GET", "/api/v1/audit", nil)
	require.Equal(t, 200, code, m)
	var out []string
	for _, a := range m["records"].([]any) {
		rec := a.(map[string]any)
		if action := rec["action"].(string); action == "runs.pause" || action == "runs.unpause" {
			detail, _ := rec["detail"].(map[string]any)
			target, _ := rec["target"].(string)
			out = append(out, fmt.Sprint(action, " ", target, " ", rec["result"], " ", rec["identity"], " ", detail["selector"], " ", detail["reason"]))
		}
	}
	return out
}

// runbook pause and runbook resume through the binary on one runbook
// serve over a state file: a pause by label, made while a run's step
// executes, lets that step finish and parks the run with who paused it
// and why (runbook runs show says so); runbook pause list shows the pause;
// runbook resume --label wakes the run, which goes on from its second
// step, each step once. Both are audited as the operator.
func TestRunbookPauseParksARunAtItsNextStepAndResumeWakesIt(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/freeze.yaml", freezePlaybook(c.dir))
	secret := c.operatorToken(t)
	s := c.serve()
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)

	code, m := s.api(t, "POST", "/api/v1/playbooks/freeze-upgrade/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	run := m["id"].(string)
	waitFor(t, 10*time.Second, "the first step executes", func() bool { return countLines(t, c.dir, "first.log") == 1 })

	r := c.run("pause", "--label", "team=platform", "--reason", "change freeze")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "paused the runs of label team=platform (pause p")
	assert.Contains(t, r.stdout, "playbooks it selects now: freeze-upgrade")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	waitFor(t, 10*time.Second, "the run parks", func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+run, nil)
		return m["status"] == "waiting"
	})
	r = c.run("runs", "show", run)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "paused by alice: change freeze; no step starts until the pause is lifted")
	assert.NotContains(t, r.stdout, "waiting for approval")
	assert.Equal(t, 0, countLines(t, c.dir, "second.log"), "no step started after the pause")
	r = c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, run+`\s+freeze-upgrade\s+waiting \(paused\)`, r.stdout)

	r = c.run("pause", "list")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "label team=platform")
	assert.Contains(t, r.stdout, "change freeze")
	r = c.run("pause", "--label", "team=platform", "--reason", "twice")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "paused already")

	r = c.run("resume", "--label", "team=platform")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "resumed the runs of label team=platform")
	waitFor(t, 10*time.Second, "the run ends", func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+run, nil)
		return m["status"] == "succeeded"
	})
	assert.Equal(t, 1, countLines(t, c.dir, "first.log"), "the first step ran once")
	assert.Equal(t, 1, countLines(t, c.dir, "second.log"))
	r = c.run("resume", "--label", "team=platform")
	assert.NotEqual(t, 0, r.code, r)
	assert.Contains(t, r.stderr, "no pause is --label team=platform")

	audit := auditOf(t, s)
	require.Len(t, audit, 3, "%v", audit)
	assert.Regexp(t, `^runs.pause pause:p[0-9a-f]{8} ok alice label team=platform change freeze$`, audit[0])
	assert.Regexp(t, `^runs.pause  conflict alice label team=platform twice$`, audit[1])
	assert.Regexp(t, `^runs.unpause pause:p[0-9a-f]{8} ok alice label team=platform change freeze$`, audit[2])
}

// Across two replicas on PostgreSQL: a pause made through replica A parks
// the run replica B executes at its next step, and a run started on A
// parks before its first step; runbook resume through B wakes both, the
// one parked on A included, each step once. Audited as the operator.
func TestRunbookPauseAcrossTwoReplicas(t *testing.T) {
	c := newCLI(t)
	onDatabase(t, c)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/freeze.yaml", freezePlaybook(c.dir))
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s}\n", replicaLease))
	secret := c.operatorToken(t)
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks")}, proc: make([]*serveProc, 2), host: host}
	rs.start(0)
	rs.start(1)
	a, b := rs.proc[0], rs.proc[1]
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)
	runOf := func(id string) map[string]any {
		_, m := a.api(t, "GET", "/api/v1/runs/"+id, nil)
		return m
	}

	code, m := b.api(t, "POST", "/api/v1/playbooks/freeze-upgrade/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	onB := m["id"].(string)
	waitFor(t, 10*time.Second, "B executes the first step", func() bool { return countLines(t, c.dir, "first.log") == 1 })

	r := c.run("pause", "freeze-*", "--reason", "change freeze", "--server", rs.url(0))
	require.Equal(t, 0, r.code, r)
	// B learns of the pause from the store's notice: the step is let
	// finish once B says its playbook is paused (its host's copy, which
	// its engine matches), else under load the run could go past the
	// boundary before the notice, as it may in production.
	waitFor(t, 10*time.Second, "B knows the pause", func() bool {
		_, pb := b.api(t, "GET", "/api/v1/playbooks/freeze-upgrade", nil)
		return pb["paused"] != nil
	})
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	waitFor(t, 10*time.Second, "the run B executes parks", func() bool { return runOf(onB)["status"] == "waiting" })
	assert.Equal(t, "paused by alice: change freeze", runOf(onB)["paused"])
	assertOwner(t, rs.owner(1), runOf(onB)["owner"].(string), "B holds the paused run")

	code, m = a.api(t, "POST", "/api/v1/playbooks/freeze-upgrade/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	onA := m["id"].(string)
	waitFor(t, 10*time.Second, "the new run on A parks", func() bool { return runOf(onA)["status"] == "waiting" })
	assert.Equal(t, "paused by alice: change freeze", runOf(onA)["paused"])
	assertOwner(t, rs.owner(0), runOf(onA)["owner"].(string), "A holds the new run")
	r = c.run("runs", "show", onA, "--server", rs.url(1))
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "paused by alice: change freeze")
	assert.Equal(t, 1, countLines(t, c.dir, "first.log"), "the new run started no step")
	assert.Equal(t, 0, countLines(t, c.dir, "second.log"))

	r = c.run("resume", "freeze-*", "--server", rs.url(1))
	require.Equal(t, 0, r.code, r)
	resumed := time.Now()
	for _, id := range []string{onA, onB} {
		waitFor(t, 10*time.Second, "run "+id+" ends after the resume", func() bool { return runOf(id)["status"] == "succeeded" })
	}
	t.Logf("both runs ended %s after the resume through B", time.Since(resumed).Round(time.Millisecond))
	assertOwner(t, rs.owner(0), runOf(onA)["owner"].(string), "A went on with its run")
	assert.Equal(t, 2, countLines(t, c.dir, "first.log"), "once per run: no step repeated")
	assert.Equal(t, 2, countLines(t, c.dir, "second.log"))

	audit := auditOf(t, a)
	require.Len(t, audit, 2, "%v", audit)
	assert.Regexp(t, `^runs.pause pause:p[0-9a-f]{8} ok alice freeze-\* change freeze$`, audit[0])
	assert.Regexp(t, `^runs.unpause pause:p[0-9a-f]{8} ok alice freeze-\* change freeze$`, audit[1])
}

// A pause lifted while no runbook serve holds the state file (runbook
// resume writes the file, audited as the local user) lets the run it
// parked go on when the server starts again; a run still paused at a
// restart parks again before its next step.
func TestARunPausedBeforeARestartGoesOnAfterAResumeMadeWhileTheServerWasStopped(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/freeze.yaml", freezePlaybook(c.dir))
	s := c.serve()
	code, m := s.api(t, "POST", "/api/v1/pauses", map[string]any{"pattern": "freeze-*", "reason": "change freeze"})
	require.Equal(t, 201, code, m)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	code, m = s.api(t, "POST", "/api/v1/playbooks/freeze-upgrade/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	run := m["id"].(string)
	waitFor(t, 10*time.Second, "the run parks before its first step", func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+run, nil)
		return m["status"] == "waiting" && m["paused"] != nil
	})
	s.stop(t)

	s = c.serve()
	waitFor(t, 10*time.Second, "the run is held again after the restart", func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+run, nil)
		return m["status"] == "waiting" && m["parked"] == true
	})
	assert.Equal(t, 0, countLines(t, c.dir, "first.log"), "still paused: no step started")
	s.stop(t)

	r := c.run("resume", "freeze-*")
	require.Equal(t, 0, r.code, r)
	r = c.run("audit")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `runs\.unpause\s+pause:p[0-9a-f]{8}`, r.stdout)
	s = c.serve()
	waitFor(t, 10*time.Second, "the run ends once the server is back", func() bool {
		_, m := s.api(t, "GET", "/api/v1/runs/"+run, nil)
		return m["status"] == "succeeded"
	})
	assert.Equal(t, 1, countLines(t, c.dir, "first.log"))
	assert.Equal(t, 1, countLines(t, c.dir, "second.log"))
}
