package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bgRun is a `runbook run` running in "another terminal".
type bgRun struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	id   string
}

// startWaiting starts `runbook run --wait FILE` in the background and
// returns once its run waits for its approval and its socket answers.
func (c *cli) startWaiting(t *testing.T, pb string) *bgRun {
	t.Helper()
	return c.startRun(t, "step gate is waiting for approval", "run", "--wait", pb)
}

// startRun starts `runbook args...` in the background and returns once it
// printed want.
func (c *cli) startRun(t *testing.T, want string, args ...string) *bgRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	b := &bgRun{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-b.done
	})
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(b.out.String(), want) {
		select {
		case <-b.done:
			t.Fatalf("runbook run exited before printing %q:\n%s", want, b.out)
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "the run does not print %q:\n%s", want, b.out)
	}
	b.id = runIDOf(t, b.out.String())
	return b
}

// exit waits for the background run to end and returns its exit code.
func (b *bgRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("runbook run did not end:\n%s", b.out)
	}
	return b.cmd.ProcessState.ExitCode()
}

func TestRunsVerbsWorkBesideARunningRun(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	b := c.startWaiting(t, pb)

	t.Run("the socket beside the state file is the owner's alone", func(t *testing.T) {
		fi, err := os.Stat(c.state + ".sock")
		require.NoError(t, err)
		assert.Equal(t, os.ModeSocket, fi.Mode().Type())
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})

	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, b.id+`\s+gated\s+waiting`, r.stdout)

	r = c.run("runs", "show", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "waiting for approval of step gate; answer with: runbook runs approve "+b.id+" gate")

	r = c.run("runs", "logs", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "prepare: preparing")

	follow := exec.Command(bin, "runs", "logs", "-f", b.id)
	follow.Dir, follow.Env = c.dir, c.env
	followed := &syncBuffer{}
	follow.Stdout, follow.Stderr = followed, followed
	require.NoError(t, follow.Start())
	followDone := make(chan error, 1)
	go func() { followDone <- follow.Wait() }()
	t.Cleanup(func() { _ = follow.Process.Kill() })

	r = c.run("runs", "approve", b.id, "gate", "--field", "tiket=42")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `did you mean "ticket"`)
	r = c.run("runs", "show", b.id)
	assert.Contains(t, r.stdout, "waiting for approval of step gate", "a refused answer leaves the run waiting")

	r = c.run("runs", "approve", b.id, "gate", "--field", "ticket=42")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "ship: shipping ticket 42 for tester")
	assert.Contains(t, r.stdout, "run "+b.id+" succeeded in")

	require.Equal(t, 0, b.exit(t), "the run continued in its own process:\n%s", b.out)
	assert.Contains(t, b.out.String(), "ship: shipping ticket 42 for tester")
	select {
	case err := <-followDone:
		require.NoError(t, err, followed.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("runs logs -f did not return when the run ended:\n%s", followed)
	}
	assert.Contains(t, followed.String(), "ship: shipping ticket 42 for tester")

	t.Run("the socket and the holder file go with the process", func(t *testing.T) {
		for _, p := range []string{c.state + ".sock", c.state + ".run"} {
			_, err := os.Stat(p)
			assert.True(t, errors.Is(err, os.ErrNotExist), "%s: %v", p, err)
		}
	})

	t.Run("the audit log names the OS user who answered through the socket", func(t *testing.T) {
		r := c.run("audit")
		require.Equal(t, 0, r.code, r)
		assert.Regexp(t, `local:tester\s+run\.approve\s+run:`+b.id+`\s+ok\s+unix socket`, r.stdout)
	})
}

func TestRunsVerbsWorkBesideALongStep(t *testing.T) {
	c := newCLI(t)
	pb := c.file("nap.yaml", `version: 1
name: nap
steps:
  - {id: nap, uses: shell, with: {command: "sleep 30"}}
  - {id: after, uses: log, with: {message: never}}
`)
	parked := c.run("run", c.file("gated.yaml", approvalPlaybook))
	require.Equal(t, 0, parked.code, parked)
	gated := runIDOf(t, parked.stdout)
	b := c.startRun(t, "step nap started", "run", pb)
	b.id = runIDOf(t, b.out.String())

	// A parked run is not the holder's to continue: its answer waits.
	r := c.run("runs", "approve", gated, "gate", "--field", "ticket=1")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "run "+gated+" is not executed by runbook run (pid "+strconv.Itoa(b.cmd.Process.Pid)+")")

	r = c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, b.id+`\s+nap\s+running`, r.stdout)
	assert.Regexp(t, gated+`\s+gated\s+waiting`, r.stdout, "the refused answer left it waiting")
	r = c.run("runs", "show", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `status:\s+running`, r.stdout)
	r = c.run("runs", "prune", "--older-than", "1d")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "runbook run (pid "+strconv.Itoa(b.cmd.Process.Pid)+")")
	assert.Contains(t, r.stderr, "holds the state file")

	r = c.run("runs", "cancel", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, 1, b.exit(t), b.out.String())
	assert.NotContains(t, b.out.String(), "never")
	r = c.run("runs", "show", b.id)
	assert.Contains(t, r.stdout, "cancelled")
}

func TestRunsCancelBesideARunningRunEndsItCancelled(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	b := c.startWaiting(t, pb)

	r := c.run("runs", "cancel", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "run "+b.id+" cancelled")
	assert.Equal(t, 1, b.exit(t), b.out.String())
	assert.Contains(t, b.out.String(), "run "+b.id+" cancelled after")

	r = c.run("runs", "list", "--status", "cancelled")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, b.id+`\s+gated\s+cancelled.*cancelled by tester`, r.stdout)
}

func TestASecondRunOnAHeldStateFileNamesTheHolder(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	b := c.startWaiting(t, pb)

	r := c.run("run", pb)
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "held by runbook run of playbook gated (pid "+strconv.Itoa(b.cmd.Process.Pid)+")")
	assert.Contains(t, r.stderr, "runbook runs list|show|logs|approve|cancel work beside it")
	assert.Contains(t, r.stderr, "--state PATH")
	assert.Less(t, r.took, 5*time.Second, "it does not wait for the holder")
}

func TestASocketLeftByAKilledRunIsReplaced(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	b := c.startWaiting(t, pb)
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	b.exit(t)
	_, err := os.Stat(c.state + ".sock")
	require.NoError(t, err, "kill -9 leaves the socket behind")

	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, "the file is free: the verbs read it:\n%s", r)

	second := c.startWaiting(t, pb)
	conn, err := net.Dial("unix", c.state+".sock")
	require.NoError(t, err, "the new run listens on the socket")
	conn.Close()
	r = c.run("runs", "show", second.id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "waiting for approval of step gate")
}

// greetPlaybook greets with a string input and checks a secret one
// without printing it.
const greetPlaybook = `version: 1
name: hello
inputs:
  who: {type: string, required: true}
  token: {type: string, secret: true, default: ""}
steps:
  - {id: greet, uses: log, with: {message: "hello ${{ inputs.who }}"}}
  - id: check
    uses: shell
    with: {command: 'test "$TOKEN" = s3cr3t-value', env: {TOKEN: "${{ inputs.token }}"}}
`

func TestRunSubmitsToTheServerHoldingTheStateFile(t *testing.T) {
	c := newCLI(t)
	c.writePlaybooks(t)
	hello := c.file("playbooks/hello.yaml", greetPlaybook)
	// A server parks a step that waits longer than 2 s (DefaultParkAfter).
	napper := c.file("playbooks/napper.yaml", `version: 1
name: napper
steps:
  - {id: nap, uses: sleep, with: {duration: 3s}}
  - {id: after, uses: log, with: {message: awake}}
`)
	s := c.serveRuns(t)

	r := c.run("run", hello, "-i", "who=team", "-i", "token=s3cr3t-value")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "greet: hello team")
	assert.Contains(t, r.stdout, "succeeded in")
	assert.Contains(t, r.stderr, "holds the state file: run ")
	assert.NotContains(t, r.stdout+r.stderr, "s3cr3t-value")
	id := runIDOf(t, r.stdout)
	list := c.run("runs", "list")
	require.Equal(t, 0, list.code, list)
	assert.Regexp(t, id+`\s+hello\s+succeeded`, list.stdout, "the run is the server's")

	t.Run("the exit code is the run's outcome", func(t *testing.T) {
		r := c.run("run", filepath.Join(c.dir, "playbooks", "flaky.yaml"))
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stdout, "failed after")

		retry := c.run("runs", "retry", "--detach", runIDOf(t, r.stdout))
		require.Equal(t, 0, retry.code, retry)
		assert.Regexp(t, `^\d{8}T\d{6}-[0-9a-f]{6}\n$`, retry.stdout, "runs retry --detach prints the bare ID too")
	})

	t.Run("--detach prints the bare run ID on stdout and returns", func(t *testing.T) {
		r := c.run("run", "--detach", hello, "-i", "who=later")
		require.Equal(t, 0, r.code, r)
		assert.Regexp(t, `^\d{8}T\d{6}-[0-9a-f]{6}\n$`, r.stdout, "RUN=$(runbook run --detach FILE) takes stdout")
		id := strings.TrimSpace(r.stdout)
		assert.Contains(t, r.stderr, "follow it with: runbook runs logs -f "+id)
		assert.NotContains(t, r.stdout, "hello later")
		deadline := time.Now().Add(10 * time.Second)
		for {
			show := c.run("runs", "show", id)
			if strings.Contains(show.stdout, "succeeded") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the detached run does not finish:\n%s", show)
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("a run the server parks on a timed wait is followed to its end", func(t *testing.T) {
		for _, args := range [][]string{{"--quiet"}, nil} {
			r := c.run(append([]string{"run", napper}, args...)...)
			require.Equal(t, 0, r.code, r)
			assert.Regexp(t, `run \S+ succeeded in [3-9]`, r.stdout, "%v: the outcome, after the nap", args)
			assert.NotContains(t, r.stdout, "follow it with", "not left early")
			if args == nil {
				assert.Contains(t, r.stdout, "step nap is waiting until ", "what it waits for: a moment")
				assert.NotContains(t, r.stdout, "approval")
			}
		}
	})

	t.Run("--wait follows the run through its approval", func(t *testing.T) {
		b := c.startRun(t, "step gate is waiting for approval", "run", "--wait", filepath.Join(c.dir, "playbooks", "gated.yaml"))
		b.id = runIDOf(t, b.out.String())
		r := c.run("runs", "approve", b.id, "gate", "--field", "ticket=7", "--no-resume")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, 0, b.exit(t), b.out.String())
		assert.Contains(t, b.out.String(), "ship: shipping ticket 7 for tester")
		assert.Contains(t, b.out.String(), "run "+b.id+" succeeded in")
	})

	t.Run("a server that does not answer is named with its PID", func(t *testing.T) {
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
		r := c.run("run", hello, "-i", "who=x")
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGCONT))
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "held by runbook serve (pid "+strconv.Itoa(s.cmd.Process.Pid)+"), which does not answer")
	})

	t.Run("a playbook the server does not have runs apart, in a state of its own, said on stderr", func(t *testing.T) {
		other := c.file("other.yaml", strings.Replace(greetPlaybook, "name: hello", "name: other", 1))
		r := c.run("run", other, "-i", "who=apart", "-i", "token=s3cr3t-value")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "greet: hello apart")
		apart := strings.TrimSuffix(c.state, ".db") + ".adhoc.db"
		assert.Contains(t, r.stderr, "runbook serve (pid "+strconv.Itoa(s.cmd.Process.Pid)+") holds the state file "+c.state+
			" and runs its own playbooks only: this run of "+other+" executes here, apart, with its state in "+apart)
		id := runIDOf(t, r.stdout)
		assert.NotContains(t, c.run("runs", "list").stdout, id, "not in the server's state")
		list := c.run("runs", "list", "--state", apart)
		assert.Regexp(t, id+`\s+other\s+succeeded`, list.stdout)

		r = c.run("run", "--detach", other)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, `has no playbook named "other"`, "nothing would run a detached ad-hoc run")
	})

	t.Run("a file that differs from the server's copy is refused", func(t *testing.T) {
		changed := c.file("hello-changed.yaml", strings.Replace(greetPlaybook, "hello ${{", "hi ${{", 1))
		r := c.run("run", changed, "-i", "who=x")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "differs from "+changed)
	})
}

func TestAStateFileTooDeepForASocketPathGetsOneInTheTemporaryDirectory(t *testing.T) {
	c := newCLI(t)
	deep := filepath.Join(c.dir, strings.Repeat("d", 100), "state.db")
	for i, kv := range c.env {
		if strings.HasPrefix(kv, "RUNBOOK_STATE=") {
			c.env[i] = "RUNBOOK_STATE=" + deep
		}
	}
	pb := c.file("gated.yaml", approvalPlaybook)
	b := c.startWaiting(t, pb)

	data, err := os.ReadFile(deep + ".run")
	require.NoError(t, err)
	assert.Contains(t, string(data), `"socket":"`+os.TempDir())
	r := c.run("runs", "show", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "waiting for approval of step gate")
	r = c.run("runs", "approve", b.id, "gate", "--field", "ticket=1")
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, 0, b.exit(t), b.out.String())
}

func TestRunsLogsFollowsAStepsOutputLiveThroughTheSocket(t *testing.T) {
	c := newCLI(t)
	pb := c.file("talk.yaml", `version: 1
name: talk
steps:
  - {id: talk, uses: shell, with: {command: "echo first-line; sleep 30"}}
`)
	b := c.startRun(t, "first-line", "run", pb)
	b.id = runIDOf(t, b.out.String())
	follow := c.startRun(t, "first-line", "runs", "logs", "-f", b.id)
	select {
	case <-b.done:
		t.Fatalf("the run ended before its line was followed:\n%s", b.out)
	default:
	}
	r := c.run("runs", "cancel", b.id)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, 1, b.exit(t), b.out.String())
	assert.Equal(t, 0, follow.exit(t), "runs logs -f ends with the run:\n%s", follow.out)
	assert.Contains(t, follow.out.String(), "cancelled")
}
