package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markerPlaybook fails at step check until the file marker exists; its
// shell steps record what ran in steps.txt.
func markerPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: flaky
steps:
  - {id: first, uses: shell, with: {command: "echo first >> %[1]s/steps.txt"}}
  - {id: check, uses: shell, with: {command: "test -f %[1]s/marker"}}
  - {id: last, uses: shell, with: {command: "echo last >> %[1]s/steps.txt"}}
`, dir)
}

// serveRuns writes the playbooks of these tests into a playbook directory
// and starts `runbook serve` on it; the CLI then has the API token and the
// server is stopped with SIGTERM at the end of the test.
func (c *cli) serveRuns(t *testing.T, args ...string) *serveProc {
	t.Helper()
	s := c.serve(append([]string{"--playbooks", filepath.Join(c.dir, "playbooks")}, args...)...)
	t.Cleanup(func() {
		select {
		case <-s.done: // stopped by the test
		default:
			s.stop(t)
		}
	})
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	return s
}

func (c *cli) writePlaybooks(t *testing.T) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/flaky.yaml", markerPlaybook(c.dir))
	c.file("playbooks/gated.yaml", approvalPlaybook)
}

// startGated starts the approval playbook through the API and waits until
// its approval step waits.
func (c *cli) startGated(t *testing.T, s *serveProc) string {
	t.Helper()
	code, run := s.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)
	want := "waiting for approval of step gate; answer with: runbook runs approve " + id + " gate"
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.run("runs", "show", id)
		if strings.Contains(r.stdout, want) {
			return id
		}
		require.True(t, time.Now().Before(deadline), "run %s does not wait for its approval:\n%s", id, r)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunsVerbsGoThroughTheServerWithTheSameOutput(t *testing.T) {
	c := newCLI(t)
	c.writePlaybooks(t)
	r := c.run("run", filepath.Join(c.dir, "playbooks", "flaky.yaml"))
	require.Equal(t, 1, r.code, r)
	bad := runIDOf(t, r.stdout)

	// The same commands, first on the file, then through the server.
	commands := [][]string{
		{"runs", "list"},
		{"runs", "list", "--status", "failed", "--output", "json"},
		{"runs", "show", bad},
		{"runs", "show", bad, "--output", "json"},
		{"runs", "logs", bad},
		{"runs", "logs", bad, "--output", "json"},
		{"runs", "logs", "-f", bad},
	}
	fromFile := make([]result, len(commands))
	for i, args := range commands {
		fromFile[i] = c.run(args...)
		require.Equal(t, 0, fromFile[i].code, "%v: %s", args, fromFile[i])
	}
	s := c.serveRuns(t)
	_, err := os.Stat(c.state + ".server")
	require.NoError(t, err, "the server writes its address beside the state file")
	for i, args := range commands {
		t.Run(strings.ReplaceAll(strings.Join(args, " "), bad, "RUN")+" prints what it printed from the file", func(t *testing.T) {
			r := c.run(args...)
			require.Equal(t, 0, r.code, r)
			assert.Equal(t, fromFile[i].stdout, r.stdout)
		})
	}

	t.Run("runs approve answers through the server and shows the rest of the run", func(t *testing.T) {
		id := c.startGated(t, s)
		follow := exec.Command(bin, "runs", "logs", "-f", id)
		follow.Dir, follow.Env = c.dir, c.env
		var out bytes.Buffer
		follow.Stdout, follow.Stderr = &out, &out
		require.NoError(t, follow.Start())
		done := make(chan error, 1)
		go func() { done <- follow.Wait() }()
		t.Cleanup(func() { _ = follow.Process.Kill() })

		r := c.run("runs", "approve", id, "gate", "--by", "alice", "--field", "ticket=42")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "step gate approved by alice")
		assert.Contains(t, r.stdout, "ship: shipping ticket 42 for alice")
		assert.NotContains(t, r.stdout, "prepare: preparing", "only what the answer caused is shown")
		assert.Contains(t, r.stdout, "run "+id+" succeeded in")

		select {
		case err := <-done:
			require.NoError(t, err, out.String())
		case <-time.After(10 * time.Second):
			t.Fatalf("runs logs -f did not return when the run ended:\n%s", out.String())
		}
		assert.Contains(t, out.String(), "prepare: preparing")
		assert.Contains(t, out.String(), "ship: shipping ticket 42 for alice")
		assert.True(t, strings.HasSuffix(out.String(), "run succeeded\n"), out.String())

		r = c.run("runs", "approve", id, "gate")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "not waiting for approval")
	})

	t.Run("runs approve with a misspelt field is refused through the server and the run keeps waiting", func(t *testing.T) {
		id := c.startGated(t, s)
		r := c.run("runs", "approve", id, "gate", "--field", "tiket=42")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "field ticket is required\n")
		assert.Contains(t, r.stderr, `unknown field "tiket"; did you mean "ticket"?`)
		r = c.run("runs", "approve", id, "gate", "--field", "ticket=42")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "ship: shipping ticket 42 for tester")
		assert.Contains(t, r.stdout, "run "+id+" succeeded in")
	})

	t.Run("runs cancel stops a waiting run through the server", func(t *testing.T) {
		id := c.startGated(t, s)
		r := c.run("runs", "cancel", id)
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "run "+id+" cancelled\n", r.stdout)
		r = c.run("runs", "show", id)
		assert.Contains(t, r.stdout, "status:    cancelled")
		r = c.run("runs", "cancel", id)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "already cancelled")
	})

	t.Run("runs retry --from runs the failed run again on the server, reusing what came before", func(t *testing.T) {
		c.file("marker", "")
		r := c.run("runs", "retry", bad, "--from", "check")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "step first: succeeded in run "+bad+"; reused")
		assert.Contains(t, r.stdout, "step check succeeded")
		next := runIDOf(t, r.stdout)
		assert.Contains(t, r.stdout, "run "+next+" succeeded in")
		got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
		require.NoError(t, err)
		assert.Equal(t, "first\nlast\n", string(got), "first ran once, in the failed run")
		r = c.run("runs", "show", next)
		assert.Contains(t, r.stdout, "retries:   "+bad+" (from step check)")

		r = c.run("runs", "retry", bad, "--from", "nope")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, `has no step "nope"`)
		r = c.run("runs", "retry", next)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "only a failed or cancelled run can be retried")
	})

	t.Run("a wrong or missing token is a clear error", func(t *testing.T) {
		good := c.env
		defer func() { c.env = good }()
		c.env = append(withoutEnv(good, "RUNBOOK_API_TOKEN"), "RUNBOOK_API_TOKEN=wrong")
		r := c.run("runs", "list")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "refused the API token: invalid bearer token")
		assert.Contains(t, r.stderr, "Try: set RUNBOOK_API_TOKEN")
		assert.NotContains(t, r.stderr, "wrong")

		c.env = withoutEnv(good, "RUNBOOK_API_TOKEN")
		r = c.run("runs", "show", bad)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "the secret RUNBOOK_API_TOKEN is not set")
	})

	t.Run("--server names the server, whatever the state file", func(t *testing.T) {
		r := c.run("runs", "show", bad, "--server", s.url, "--state", filepath.Join(c.dir, "elsewhere.db"))
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, fromFile[2].stdout, r.stdout)
	})

	s.stop(t)
	_, err = os.Stat(c.state + ".server")
	assert.ErrorIs(t, err, os.ErrNotExist, "a stopped server removes its address file")
	r = c.run("runs", "show", bad)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, fromFile[2].stdout, r.stdout, "without a server the file is read again")
}

func TestRunsRetryWithoutAServerRunsHere(t *testing.T) {
	c := newCLI(t)
	pb := c.file("flaky.yaml", markerPlaybook(c.dir))
	r := c.run("run", pb)
	require.Equal(t, 1, r.code, r)
	bad := runIDOf(t, r.stdout)

	r = c.run("runs", "retry", bad)
	assert.Equal(t, 1, r.code, "the step fails again: %s", r)
	again := runIDOf(t, r.stdout)
	assert.Contains(t, r.stdout, "run "+again+" failed after")

	c.file("marker", "")
	r = c.run("runs", "retry", bad, "--output", "json")
	require.Equal(t, 0, r.code, r)
	var doc runDocument
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.EqualValues(t, "succeeded", doc.Run.Status)
	assert.Equal(t, bad, doc.Run.RetryOf)
	assert.Equal(t, "check", doc.Run.RetryFrom, "without --from: the first step that did not succeed")
	got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, "first\nlast\n", string(got), "first was reused, not run again")

	r = c.run("runs", "retry", again, "--from", "first")
	require.Equal(t, 0, r.code, r)
	got, _ = os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	assert.Equal(t, "first\nlast\nfirst\nlast\n", string(got), "--from first runs every step again")

	r = c.run("runs", "retry", doc.Run.ID)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "only a failed or cancelled run can be retried")
	r = c.run("runs", "retry", bad, "--detach")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "--detach needs runbook serve")
}

func TestAStaleServerAddressFallsBackToTheFile(t *testing.T) {
	c := newCLI(t)
	ok := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	// A server killed with SIGKILL leaves its address file behind.
	c.file("state/state.db.server", `{"url":"http://127.0.0.1:1","pid":999999}`)
	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, ok)
}

// TestSecretInputsAreGivenAgainToResumeAndRetry: the state file never
// keeps a secret input, so a run continued from its record is cancelled
// with the command to use, and -i gives the value again.
func TestSecretInputsAreGivenAgainToResumeAndRetry(t *testing.T) {
	c := newCLI(t)
	pb := c.file("guarded.yaml", `version: 1
name: guarded
inputs:
  pw: {type: string, secret: true}
steps:
  - {id: gate, uses: approval, with: {message: "go?"}}
  - {id: check, uses: shell, with: {command: 'test -f marker && test "${{ inputs.pw }}" = zebra-unique-83'}}
`)
	r := c.run("run", pb, "-i", "pw=zebra-unique-83")
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	r = c.run("runs", "approve", id, "gate") // and continues the run here, from its record
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout, "run "+id+" cancelled: run "+id+" was started with secret input pw")
	assert.Contains(t, r.stdout, "runbook run --resume "+id+" -i pw=VALUE")
	r = c.run("run", "--resume", id)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout, "secret input pw")
	r = c.run("run", "--resume", id, "-i", "other=1")
	assert.NotEqual(t, 0, r.code, r)
	assert.Contains(t, r.stderr, "inputs.other: only secret inputs can be given again")

	r = c.run("run", "--resume", id, "-i", "pw=zebra-unique-83")
	assert.Equal(t, 1, r.code, "the check fails without the marker: %s", r)
	assert.Contains(t, r.stdout, "step check failed")
	assert.NotContains(t, r.stdout+r.stderr, "zebra-unique-83")

	c.file("marker", "")
	r = c.run("runs", "retry", id, "-i", "pw=zebra-unique-83")
	require.Equal(t, 0, r.code, r)
	assert.NotContains(t, r.stdout+r.stderr, "zebra-unique-83")
}
