package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// agentReplicas starts n replicas of runbook serve on one fresh database
// (replica lease 2 s, agent lease 3 s) with the playbooks files, and
// returns them with a store on the database.
func agentReplicas(t *testing.T, n int, files map[string]string) (*cli, *replicaSet, *postgres.Store) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	for name, text := range files {
		c.file("playbooks/"+name, text)
	}
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s}\n", replicaLease))
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks"), "--agent-lease", "3s"}, proc: make([]*serveProc, n), host: host}
	for i := range n {
		rs.start(i)
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return c, rs, st
}

// ownerIndex is the replica of rs that owns run id (-1: none of them).
func ownerIndex(t *testing.T, rs *replicaSet, st state.Store, id string) int {
	t.Helper()
	r, err := st.GetRun(context.Background(), id)
	require.NoError(t, err)
	for i := range rs.proc {
		if rs.url(i) != "" && sameOwner(rs.owner(i), r.Owner) {
			return i
		}
	}
	return -1
}

// Three replicas on one database, agents each polling a different one:
// every replica's runs are placed on the agents, whichever replica they
// poll; each attempt runs once; no agent runs more attempts at once than
// its capacity, though the replicas place at the same time; and the lines
// of a step whose agent polls another replica than the run's appear live.
func TestAgentsServeTheRunsOfEveryReplica(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "running"), 0o700))
	c, rs, st := agentReplicas(t, 3, map[string]string{
		// Marks itself running, records how many run on its agent, and
		// appends to its run's marker.
		"fan.yaml": fmt.Sprintf(`version: 1
name: fan
steps:
  - id: each
    uses: shell
    runs_on: {labels: {pool: fan}}
    with:
      command: |
        touch %[1]s/running/${{ run.id }}-$AGENT_NAME
        ls %[1]s/running | grep -c -- "-$AGENT_NAME\$" >> %[1]s/counts-$AGENT_NAME
        echo "$AGENT_NAME" >> %[1]s/ran-${{ run.id }}
        echo "on $AGENT_NAME"
        sleep 0.3
        rm %[1]s/running/${{ run.id }}-$AGENT_NAME
`, dir),
		"web.yaml": webOnAgents(dir),
	})
	capacity := map[string]int{"fan-0": 2, "fan-1": 1, "fan-2": 1}
	polls := map[string]int{}
	for i := range 3 {
		name := fmt.Sprintf("fan-%d", i)
		c.agent(rs.proc[i], name, "pool=fan", capacity[name])
		polls[name] = i
	}
	c.agent(rs.proc[2], "web-1", "role=web", 1)

	// A run started on replica 0, its step on the agent polling replica 2.
	web := startRun(t, rs.proc[0], "web")
	require.Eventually(t, func() bool { return strings.Contains(outputOf(t, rs.proc[1], web), "tick|tick on web-1") }, 15*time.Second, 20*time.Millisecond,
		"the line printed before the step waits is readable while it runs, through any replica")
	_, run := rs.proc[0].api(t, "GET", "/api/v1/runs/"+web, nil)
	assert.Equal(t, "running", run["status"])
	assert.Equal(t, 0, ownerIndex(t, rs, st, web), "replica 0 executes the run")

	var fans []string
	for i := range 12 {
		fans = append(fans, startRun(t, rs.proc[i%3], "fan"))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600))
	run = endOf(t, rs.proc[1], web, 20*time.Second)
	require.Equal(t, "succeeded", run["status"], run)
	assert.Equal(t, float64(1), stepOf(run, "after")["outputs"].(map[string]any)["code"], "exit_code came back a number")
	assert.Contains(t, outputOf(t, rs.proc[0], web), "tick|tock")

	elsewhere, took := 0, map[string]int{}
	for i, id := range fans {
		run := endOf(t, rs.proc[(i+1)%3], id, 60*time.Second)
		require.Equal(t, "succeeded", run["status"], run)
		b, err := os.ReadFile(filepath.Join(dir, "ran-"+id))
		require.NoError(t, err)
		agents := strings.Fields(string(b))
		require.Len(t, agents, 1, "run %s's step ran once: %v", id, agents)
		took[agents[0]]++
		if polls[agents[0]] != i%3 {
			elsewhere++
		}
	}
	t.Logf("attempts per agent %v; %d of 12 on an agent polling another replica than the run's", took, elsewhere)
	assert.Positive(t, elsewhere, "agents took the runs of replicas they do not poll")
	assert.Len(t, took, 3, "every agent took work: %v", took)
	for name, capacity := range capacity {
		b, err := os.ReadFile(filepath.Join(dir, "counts-"+name))
		require.NoError(t, err)
		for _, n := range strings.Fields(string(b)) {
			k, _ := strconv.Atoi(n)
			assert.LessOrEqual(t, k, capacity, "%s ran %s attempts at once (capacity %d)", name, n, capacity)
		}
	}
}

// kill -9 of the replica that owns a run while the run's step executes on
// an agent polling another replica: a replica takes the run over, finds
// the step's assignment and waits for it instead of placing the step
// again; the agent keeps running it and its result lands, so the step
// runs once (its marker has one line) and the run succeeds. One step ends
// before the takeover, its result sealed for the killed replica (the agent
// sends it again when asked), one after.
func TestAReplicaKilledMidAttemptLosesNoAgentAttempt(t *testing.T) {
	dir := t.TempDir()
	step := func(name string) string {
		return fmt.Sprintf(`version: 1
name: %[1]s
steps:
  - id: long
    uses: shell
    runs_on: {labels: {pool: long}}
    with:
      command: 'echo x >> %[2]s/marker-%[1]s; echo "start on $AGENT_NAME"; while [ ! -e %[2]s/gate-%[1]s ]; do sleep 0.02; done; echo "end on $AGENT_NAME"'
  - id: after
    uses: log
    with: {message: "after ${{ steps.long.outputs.stdout }}"}
`, name, dir)
	}
	c, rs, st := agentReplicas(t, 3, map[string]string{"early.yaml": step("early"), "late.yaml": step("late")})
	c.agent(rs.proc[1], "long-1", "pool=long", 2)

	early, late := startRun(t, rs.proc[0], "early"), startRun(t, rs.proc[0], "late")
	for _, id := range []string{early, late} {
		require.Eventually(t, func() bool { return strings.Contains(outputOf(t, rs.proc[1], id), "start on long-1") }, 15*time.Second, 20*time.Millisecond)
		require.Equal(t, 0, ownerIndex(t, rs, st, id))
	}
	rs.kill(0)
	killed := time.Now()
	// early's step ends now: its result reaches replica 1 while the run's
	// owner is dead, sealed for it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate-early"), nil, 0o600))
	require.Eventually(t, func() bool { return ownerIndex(t, rs, st, late) > 0 }, takeoverBound+5*time.Second, 50*time.Millisecond,
		"a replica takes the run over")
	t.Logf("late taken over by replica %d %s after the kill", ownerIndex(t, rs, st, late), time.Since(killed).Round(10*time.Millisecond))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate-late"), nil, 0o600))

	for _, id := range []string{early, late} {
		run := endOf(t, rs.proc[2], id, takeoverBound+20*time.Second)
		require.Equal(t, "succeeded", run["status"], "run %s: %v", id, run)
		assert.Contains(t, stepOf(run, "long")["outputs"].(map[string]any)["stdout"], "end on long-1", "the result of the agent's first attempt")
	}
	for _, name := range []string{"early", "late"} {
		b, err := os.ReadFile(filepath.Join(dir, "marker-"+name))
		require.NoError(t, err)
		assert.Equal(t, "x\n", string(b), "%s's step ran once", name)
	}
}
