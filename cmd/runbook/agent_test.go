package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentProc is a `runbook agent` process of a test.
type agentProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
}

// agentToken makes a token with the agent role through the server's API.
func (c *cli) agentToken(s *serveProc, name string, args ...string) string {
	c.t.Helper()
	r := c.admin().run(append([]string{"token", "create", name, "--role", "agent", "--server", s.url}, args...)...)
	require.Equal(c.t, 0, r.code, r.String())
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	return lines[len(lines)-1]
}

// admin is c with the server's admin token in its environment.
func (c *cli) admin() *cli {
	admin := *c
	admin.env = append(append([]string{}, c.env...), "RUNBOOK_API_TOKEN="+serveToken)
	return &admin
}

// agent starts `runbook agent` against s with its own token, and extra
// flags; AGENT_NAME in its environment is its name, which the steps
// print.
func (c *cli) agent(s *serveProc, name, labels string, capacity int, extra ...string) *agentProc {
	c.t.Helper()
	a := c.agentWith(s, name, labels, capacity, c.agentToken(s, name), extra...)
	require.Eventually(c.t, func() bool { return strings.Contains(a.log(), "registered") }, 15*time.Second, 20*time.Millisecond, "agent %s did not register", name)
	return a
}

// agentWith starts `runbook agent` with token tok and extra flags.
func (c *cli) agentWith(s *serveProc, name, labels string, capacity int, tok string, extra ...string) *agentProc {
	c.t.Helper()
	args := []string{"agent", "--server", s.url, "--name", name, "--labels", labels, "--capacity", strconv.Itoa(capacity), "-v"}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Dir = c.dir
	cmd.Env = append(append([]string{}, c.env...), "RUNBOOK_AGENT_TOKEN="+tok, "AGENT_NAME="+name)
	a := &agentProc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: a.stderr}
	cmd.WaitDelay = 2 * time.Second // a killed agent's shell may hold its stderr a while
	require.NoError(c.t, cmd.Start())
	go func() { _ = cmd.Wait(); close(a.done) }()
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-a.done
	})
	return a
}

func (a *agentProc) log() string {
	return a.stderr.String()
}

// startRun starts a run of playbook pb and returns its ID.
func startRun(t *testing.T, s *serveProc, pb string) string {
	t.Helper()
	code, m := s.api(t, "POST", "/api/v1/playbooks/"+pb+"/runs", map[string]any{})
	require.Equal(t, 201, code, m)
	return m["id"].(string)
}

// endOf waits for the run to end and returns it.
func endOf(t *testing.T, s *serveProc, id string, within time.Duration) map[string]any {
	t.Helper()
	var run map[string]any
	require.Eventually(t, func() bool {
		_, run = s.api(t, "GET", "/api/v1/runs/"+id, nil)
		st := run["status"]
		return st == "succeeded" || st == "failed" || st == "cancelled"
	}, within, 20*time.Millisecond, "run %s did not end: %v", id, run)
	return run
}

func stepOf(run map[string]any, id string) map[string]any {
	for _, s := range run["steps"].([]any) {
		if m := s.(map[string]any); m["id"] == id {
			return m
		}
	}
	return nil
}

// outputOf is the run's output lines so far, as "step|text".
func outputOf(t *testing.T, s *serveProc, id string) string {
	t.Helper()
	code, m := s.api(t, "GET", "/api/v1/runs/"+id+"/output", nil)
	require.Equal(t, 200, code, m)
	var b strings.Builder
	for _, l := range m["lines"].([]any) {
		lm := l.(map[string]any)
		fmt.Fprintf(&b, "%v|%v\n", lm["step"], lm["text"])
	}
	return b.String()
}

// Agents with different labels on one server (bbolt): the steps of a
// runs_on land only on the agents whose labels match, an agent never runs
// more attempts at once than its capacity, a step's lines are readable
// while it runs, and its outputs come back as a local step's (exit_code a
// number).
func TestAgentsRunOnlyMatchingStepsWithinTheirCapacityAndTheirLinesAppearLive(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "running"), 0o700))
	// Each item marks itself running, records how many are, and unmarks.
	c.file("playbooks/fan.yaml", fmt.Sprintf(`version: 1
name: fan
runs_on: {labels: {role: bastion}}
steps:
  - id: each
    for_each: [1, 2, 3, 4, 5, 6]
    max_parallel: 6
    uses: shell
    with:
      command: |
        touch %[1]s/running/${{ item }}-$AGENT_NAME
        ls %[1]s/running | grep -c -- "-$AGENT_NAME\$" >> %[1]s/counts-$AGENT_NAME
        echo "item ${{ item }} on $AGENT_NAME"
        sleep 0.4
        rm %[1]s/running/${{ item }}-$AGENT_NAME
`, c.dir))
	c.file("playbooks/web.yaml", webOnAgents(c.dir))
	s := c.serve("--agent-lease", "3s")
	c.agent(s, "bastion-a", "role=bastion,zone=a", 2)
	c.agent(s, "bastion-b", "role=bastion,zone=b", 1)
	c.agent(s, "web-1", "role=web", 1)

	fan, web := startRun(t, s, "fan"), startRun(t, s, "web")
	require.Eventually(t, func() bool { return strings.Contains(outputOf(t, s, web), "tick|tick on web-1") }, 15*time.Second, 20*time.Millisecond,
		"the line printed before the step waits is readable while it runs")
	_, run := s.api(t, "GET", "/api/v1/runs/"+web, nil)
	assert.Equal(t, "running", run["status"])
	assert.Eventually(t, func() bool {
		code, ev := s.api(t, "GET", "/api/v1/runs/"+web+"/events", nil)
		return code == 200 && strings.Contains(fmt.Sprint(ev), "running on agent web-1")
	}, 10*time.Second, 20*time.Millisecond, "the step's events name its agent while it runs")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))

	run = endOf(t, s, web, 15*time.Second)
	require.Equal(t, "succeeded", run["status"], run)
	assert.Equal(t, float64(1), stepOf(run, "after")["outputs"].(map[string]any)["code"], "exit_code came back a number")
	run = endOf(t, s, fan, 30*time.Second)
	require.Equal(t, "succeeded", run["status"], run)

	out := outputOf(t, s, fan)
	on := map[string]int{}
	for i := 1; i <= 6; i++ {
		switch {
		case strings.Contains(out, fmt.Sprintf("item %d on bastion-a", i)):
			on["bastion-a"]++
		case strings.Contains(out, fmt.Sprintf("item %d on bastion-b", i)):
			on["bastion-b"]++
		default:
			t.Errorf("item %d ran on no bastion agent:\n%s", i, out)
		}
	}
	assert.NotContains(t, out, "on web-1", "no bastion step on the web agent")
	assert.Positive(t, on["bastion-a"], "both bastion agents took work: %v", on)
	assert.Positive(t, on["bastion-b"], "both bastion agents took work: %v", on)
	for name, capacity := range map[string]int{"bastion-a": 2, "bastion-b": 1} {
		b, err := os.ReadFile(filepath.Join(c.dir, "counts-"+name))
		require.NoError(t, err)
		for _, n := range strings.Fields(string(b)) {
			k, _ := strconv.Atoi(n)
			assert.LessOrEqual(t, k, capacity, "%s ran %s attempts at once (capacity %d)", name, n, capacity)
		}
	}
	assert.Contains(t, s.get(t, "/metrics"), "\nrunbook_agent_dispatch_seconds_count 7\n",
		"each of the 7 attempts placed on an agent has its dispatch latency")
}

// A step whose agent stops answering: after the agent lease the attempt
// fails with "agent lost" (kill -9), or with on_agent_lost: retry runs
// once more on another agent; the result the stopped agent sends when it
// is continued is refused (fenced), and the run keeps its outcome.
func TestALostAgentsAttemptFailsOrRunsOnceMoreAndItsLateResultIsRefused(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	step := func(name, lost string) string {
		return fmt.Sprintf(`version: 1
name: %s
steps:
  - id: long
    uses: shell
    runs_on: {labels: {pool: %s}}
    %s
    with: {command: 'echo "start on $AGENT_NAME"; echo x >> %s/%s-$AGENT_NAME; sleep 3; echo "end on $AGENT_NAME"'}
`, name, name, lost, c.dir, name)
	}
	c.file("playbooks/killed.yaml", step("killed", ""))
	c.file("playbooks/retried.yaml", step("retried", "on_agent_lost: retry"))
	c.file("playbooks/stopped.yaml", step("stopped", ""))
	s := c.serve("--agent-lease", "2s")

	t.Run("kill -9 of the agent fails the step with agent lost after the lease", func(t *testing.T) {
		a := c.agent(s, "k1", "pool=killed", 1)
		id := startRun(t, s, "killed")
		require.Eventually(t, func() bool { return strings.Contains(outputOf(t, s, id), "start on k1") }, 15*time.Second, 20*time.Millisecond)
		killed := time.Now()
		require.NoError(t, a.cmd.Process.Kill())
		run := endOf(t, s, id, 20*time.Second)
		took := time.Since(killed)
		assert.Equal(t, "failed", run["status"])
		assert.Contains(t, fmt.Sprint(stepOf(run, "long")["error"]), "agent lost: agent k1 stopped answering for 2s")
		// The lease runs from the agent's last request, at most a poll
		// (a third of the lease) before the kill.
		assert.GreaterOrEqual(t, took, 2*time.Second*2/3, "not before the lease lapsed")
		t.Logf("agent lost %s after the kill (lease 2s)", took.Round(10*time.Millisecond))
	})

	t.Run("on_agent_lost retry runs the step once more on another agent", func(t *testing.T) {
		a := c.agent(s, "r1", "pool=retried", 1)
		id := startRun(t, s, "retried")
		require.Eventually(t, func() bool { return strings.Contains(outputOf(t, s, id), "start on r1") }, 15*time.Second, 20*time.Millisecond)
		require.NoError(t, a.cmd.Process.Kill())
		c.agent(s, "r2", "pool=retried", 1)
		run := endOf(t, s, id, 30*time.Second)
		require.Equal(t, "succeeded", run["status"], run)
		assert.Contains(t, stepOf(run, "long")["outputs"].(map[string]any)["stdout"], "end on r2")
		_, err := os.Stat(filepath.Join(c.dir, "retried-r2"))
		assert.NoError(t, err, "r2 ran it")
		b, _ := os.ReadFile(filepath.Join(c.dir, "retried-r2"))
		assert.Equal(t, "x\n", string(b), "once on r2")
	})

	t.Run("a stopped agent's result after its lease lapsed is refused", func(t *testing.T) {
		a := c.agent(s, "s1", "pool=stopped", 1)
		id := startRun(t, s, "stopped")
		require.Eventually(t, func() bool { return strings.Contains(outputOf(t, s, id), "start on s1") }, 15*time.Second, 20*time.Millisecond)
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
		run := endOf(t, s, id, 20*time.Second)
		assert.Equal(t, "failed", run["status"])
		assert.Contains(t, fmt.Sprint(stepOf(run, "long")["error"]), "agent lost")
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
		assert.Eventually(t, func() bool { return strings.Contains(a.log(), "result refused") }, 15*time.Second, 20*time.Millisecond,
			"the continued agent's result is refused")
		t.Logf("agent s1:\n%s", a.log())
		_, run = s.api(t, "GET", "/api/v1/runs/"+id, nil)
		assert.Equal(t, "failed", run["status"], "the late result changed nothing")
		assert.NotContains(t, outputOf(t, s, id), "end on s1", "nothing of the lapsed attempt was taken")
	})
}

// SIGTERM drains an agent: the attempt it runs finishes and its result
// is taken, a run started meanwhile waits for another agent, and the
// agent exits 0.
func TestSIGTERMDrainsAnAgent(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/slow.yaml", fmt.Sprintf(`version: 1
name: slow
steps:
  - id: work
    uses: shell
    runs_on: {labels: {pool: p}}
    with: {command: 'echo "start on $AGENT_NAME"; while [ ! -e %s/gate ]; do sleep 0.02; done; echo "end on $AGENT_NAME"'}
`, c.dir))
	s := c.serve("--agent-lease", "3s")
	a := c.agent(s, "d1", "pool=p", 2)
	first := startRun(t, s, "slow")
	require.Eventually(t, func() bool { return strings.Contains(outputOf(t, s, first), "start on d1") }, 15*time.Second, 20*time.Millisecond)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool {
		_, l := s.api(t, "GET", "/api/v1/agents", nil)
		ags, _ := l["agents"].([]any)
		return len(ags) == 1 && ags[0].(map[string]any)["draining"] == true
	}, 10*time.Second, 20*time.Millisecond, "the agent says it drains")
	second := startRun(t, s, "slow")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	run := endOf(t, s, first, 15*time.Second)
	assert.Equal(t, "succeeded", run["status"], run)
	assert.Contains(t, stepOf(run, "work")["outputs"].(map[string]any)["stdout"], "end on d1")
	select {
	case <-a.done:
		assert.Equal(t, 0, a.cmd.ProcessState.ExitCode(), a.log())
	case <-time.After(15 * time.Second):
		t.Fatalf("the agent did not exit after its attempt ended:\n%s", a.log())
	}
	_, run = s.api(t, "GET", "/api/v1/runs/"+second, nil)
	assert.Equal(t, "running", run["status"], "the run started during the drain waits for an agent")
	assert.NotContains(t, outputOf(t, s, second), "start on d1")
	c.agent(s, "d2", "pool=p", 1)
	run = endOf(t, s, second, 15*time.Second)
	assert.Equal(t, "succeeded", run["status"], run)
	assert.Contains(t, stepOf(run, "work")["outputs"].(map[string]any)["stdout"], "end on d2")
}

// An agent killed (kill -9) while its nks.cluster.create waits for the
// cluster's task: after the lease the attempt goes to another agent,
// which goes on from what the lost attempt recorded (its checkpoint says
// the create was answered: it resumes the wait; in doubt it would
// reconcile first). The simulator's journal holds one create.
func TestALostAgentsClusterCreateIsReconciledNotMadeTwice(t *testing.T) {
	c := newCLI(t)
	url := c.startSimAt("100", map[string]string{"CLUSTER_CREATE": "500s"}) // 5 s of real time
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/create.yaml", `
version: 1
name: create
runs_on: {labels: {net: private}}
steps:
  - id: create
    uses: nks.cluster.create
    with:
      name: prod`+nksCreateWith+`
`)
	s := c.serve("--sim-url", url, "--agent-lease", "2s")
	a := c.agent(s, "c1", "net=private", 1)
	id := startRun(t, s, "create")
	require.Eventually(t, func() bool { return slices.Contains(nksPosts(t, url), "/v1/clusters") }, 20*time.Second, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // inside the wait, with its checkpoint sent
	require.NoError(t, a.cmd.Process.Kill())
	<-a.done
	c.agent(s, "c2", "net=private", 1)
	run := endOf(t, s, id, 60*time.Second)
	require.Equal(t, "succeeded", run["status"], run)
	creates := 0
	for _, p := range nksPosts(t, url) {
		if p == "/v1/clusters" {
			creates++
		}
	}
	assert.Equal(t, 1, creates, "exactly one create call")
	code, ev := s.api(t, "GET", "/api/v1/runs/"+id+"/events", nil)
	require.Equal(t, 200, code)
	events := fmt.Sprint(ev)
	assert.Contains(t, events, "agent c1 lost")
	assert.Contains(t, events, "running on agent c2")
	assert.Less(t, strings.LastIndex(events, "waiting for an agent"), strings.Index(events, "running on agent c1"),
		"a placed attempt is not said to wait")
}

// An agent token is an identity of the agent role: limited to the labels
// it may claim (a claim beyond them is refused and the agent exits), each
// registration audited, and revocable: a revoked token's agent is refused
// at its next request and exits, and the server ends its session.
func TestAgentTokensLimitTheLabelsAndAreAuditedAndRevocable(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	s := c.serve("--agent-lease", "2s")
	tok := c.agentToken(s, "bastion-1", "--labels", "role=bastion,zone=kr1-*")

	refused := c.agentWith(s, "bastion-1", "role=bastion,tier=prod", 1, tok)
	select {
	case <-refused.done:
		assert.NotEqual(t, 0, refused.cmd.ProcessState.ExitCode())
		assert.Contains(t, refused.log(), "may not claim the label tier=prod (its token allows role=bastion, zone=kr1-*)")
	case <-time.After(15 * time.Second):
		t.Fatalf("an agent claiming a label its token does not allow still runs:\n%s", refused.log())
	}

	a := c.agentWith(s, "bastion-1", "role=bastion,zone=kr1-a", 1, tok)
	require.Eventually(t, func() bool { return strings.Contains(a.log(), "registered") }, 15*time.Second, 20*time.Millisecond, a.log())
	_, l := s.api(t, "GET", "/api/v1/agents", nil)
	require.Len(t, l["agents"], 1)
	ag := l["agents"].([]any)[0].(map[string]any)
	assert.Equal(t, "bastion-1", ag["token"])
	assert.Equal(t, map[string]any{"role": "bastion", "zone": "kr1-a"}, ag["labels"])
	_, audit := s.api(t, "GET", "/api/v1/audit", nil)
	assert.Contains(t, fmt.Sprint(audit), "agent.register")
	r := c.admin().run("agents", "list", "--server", s.url)
	require.Equal(t, 0, r.code, r.String())
	assert.Regexp(t, `bastion-1\s+role=bastion,zone=kr1-a\s+0/1`, r.stdout)

	r = c.admin().run("token", "revoke", "bastion-1", "--server", s.url)
	require.Equal(t, 0, r.code, r.String())
	select {
	case <-a.done:
		assert.NotEqual(t, 0, a.cmd.ProcessState.ExitCode())
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent of a revoked token still runs:\n%s", a.log())
	}
	require.Eventually(t, func() bool {
		_, l := s.api(t, "GET", "/api/v1/agents", nil)
		return len(l["agents"].([]any)) == 0
	}, 10*time.Second, 50*time.Millisecond, "the server ends the revoked agent's session")
}

// A secret declared `agent:` resolves on the agent that runs the step:
// the server never has it (it is not set there), the command gets it as
// data, and what comes back (lines, outputs) has it masked. A step that
// runs on the server and reads it fails saying so.
func TestAgentSecretsResolveOnTheAgentAndNeverComeBack(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/deploy.yaml", `version: 1
name: deploy
secrets:
  token: {agent: DEPLOY_TOKEN}
steps:
  - id: use
    uses: shell
    runs_on: {labels: {pool: deploy}}
    with:
      command: 'echo "token=${{ secrets.token }}"; printf %s "${{ secrets.token }}" | wc -c'
`)
	c.file("playbooks/local.yaml", `version: 1
name: local
secrets:
  token: {agent: DEPLOY_TOKEN}
steps:
  - id: here
    uses: shell
    with: {command: 'echo "${{ secrets.token }}"'}
`)
	const secret = "s3cr3t-on-the-agent-'$(touch pwned)'"
	s := c.serve("--agent-lease", "3s")
	tok := c.agentToken(s, "d1")
	c.env = append(c.env, "DEPLOY_TOKEN="+secret) // the agent's environment only
	a := c.agentWith(s, "d1", "pool=deploy", 1, tok)
	require.Eventually(t, func() bool { return strings.Contains(a.log(), "registered") }, 15*time.Second, 20*time.Millisecond)

	id := startRun(t, s, "deploy")
	run := endOf(t, s, id, 20*time.Second)
	require.Equal(t, "succeeded", run["status"], run)
	out := stepOf(run, "use")["outputs"].(map[string]any)["stdout"].(string)
	assert.Equal(t, "token=***\n"+strconv.Itoa(len(secret)), out, "the command had the whole value, as data")
	assert.NotContains(t, outputOf(t, s, id), "s3cr3t")
	_, err := os.Stat(filepath.Join(c.dir, "pwned"))
	assert.True(t, os.IsNotExist(err), "the value was data, not shell code")
	_, ev := s.api(t, "GET", "/api/v1/runs/"+id+"/events", nil)
	assert.NotContains(t, fmt.Sprint(ev), "s3cr3t")
	assert.NotContains(t, fmt.Sprint(run), "s3cr3t")
	assert.NotContains(t, s.stderr.String(), "s3cr3t")

	id = startRun(t, s, "local")
	run = endOf(t, s, id, 20*time.Second)
	assert.Equal(t, "failed", run["status"])
	assert.Contains(t, fmt.Sprint(stepOf(run, "here")["error"]), "reads the agent secret DEPLOY_TOKEN, which only an agent holds")
}

// runbook run dispatches to no agent: a runs_on step fails saying where
// it can run, and runbook validate accepts the playbook.
func TestRunbookRunSaysARunsOnStepNeedsTheServer(t *testing.T) {
	c := newCLI(t)
	pb := c.file("remote.yaml", `version: 1
name: remote
steps:
  - {id: far, uses: shell, runs_on: {labels: {role: bastion}}, with: {command: "echo hi"}}
`)
	r := c.run("validate", pb)
	require.Equal(t, 0, r.code, r.String())
	r = c.run("run", pb)
	assert.Equal(t, 1, r.code, r.String())
	assert.Contains(t, r.stdout+r.stderr, "step far runs on an agent (runs_on: role=bastion) and this process dispatches to none: run the playbook on runbook serve, where agents connect")
}

// A connected agent's long poll does not hold a server's shutdown up:
// SIGTERM answers it at once (with a 60 s lease a poll is held 20 s).
func TestAnAgentsPollDoesNotHoldServeShutdownUp(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	s := c.serve("--agent-lease", "60s")
	c.agent(s, "idle", "pool=p", 1)
	time.Sleep(500 * time.Millisecond) // its poll is held
	start := time.Now()
	s.stop(t)
	took := time.Since(start)
	t.Logf("runbook serve stopped %s after SIGTERM", took.Round(time.Millisecond))
	assert.Less(t, took, 10*time.Second, "the held poll ended with the server")
}

// webOnAgents is the web playbook of the agent tests: a shell step on an
// agent with role=web that prints its agent's name and waits for dir/gate,
// then a step on the server that reads the first's exit code.
func webOnAgents(dir string) string {
	return fmt.Sprintf(`version: 1
name: web
steps:
  - id: tick
    uses: shell
    runs_on: {labels: {role: web}}
    with:
      command: 'echo "tick on $AGENT_NAME"; while [ ! -e %s/gate ]; do sleep 0.02; done; echo tock'
  - id: after
    uses: set
    with: {code: "${{ steps.tick.outputs.exit_code + 1 }}"}
`, dir)
}
