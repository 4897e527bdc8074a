package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const helloPlaybook = `version: 1
name: hello
inputs:
  who: {type: string, default: world}
  times: {type: integer, default: 1}
steps:
  - id: greet
    uses: log
    with:
      message: "hello ${{ inputs.who }}"
      fields: {times: "${{ inputs.times }}"}
  - id: echo
    uses: shell
    with: {command: "echo shell-says-hi"}
outputs:
  said: ${{ steps.echo.outputs.stdout }}
`

const failingPlaybook = `version: 1
name: breaks
steps:
  - id: first
    uses: log
    with: {message: before}
  - id: boom
    uses: fail
    with: {message: "it broke on purpose"}
  - id: never
    uses: log
    with: {message: unreachable}
`

func TestRunPrintsOneLinePerEventWhenNotATerminal(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	r := c.run("run", pb, "-i", "who=tester")
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.Regexp(t, `^\d\d:\d\d:\d\d run `+id+` created \(playbook hello\)$`, lines[0])
	assert.Regexp(t, `(?m)^\d\d:\d\d:\d\d step greet started \(attempt 1\)$`, r.stdout)
	assert.Regexp(t, `(?m)^\d\d:\d\d:\d\d greet: hello tester times=1$`, r.stdout)
	assert.Regexp(t, `(?m)^\d\d:\d\d:\d\d step greet succeeded in \d+\.\d\ds$`, r.stdout)
	assert.Regexp(t, `(?m)^\d\d:\d\d:\d\d step echo succeeded in`, r.stdout)
	assert.Regexp(t, `^run `+id+` succeeded in \d+\.\d\ds$`, lines[len(lines)-1])
	assert.NotContains(t, r.stdout, "\x1b[", "no terminal escapes in plain output")
	assert.Empty(t, r.stderr)
}

func TestRunJSONIsOneDocumentWithTheRunAndItsSteps(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	r := c.run("run", "--output", "json", pb)
	require.Equal(t, 0, r.code, r)
	var doc struct {
		Run   map[string]any   `json:"run"`
		Steps []map[string]any `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.Equal(t, "succeeded", doc.Run["status"])
	assert.Equal(t, "hello", doc.Run["playbook"])
	assert.NotContains(t, doc.Run, "snapshot", "the playbook source is left out")
	assert.Equal(t, map[string]any{"said": "shell-says-hi"}, doc.Run["outputs"])
	require.Len(t, doc.Steps, 2)
	assert.Equal(t, "greet", doc.Steps[0]["id"])
	assert.Equal(t, "succeeded", doc.Steps[1]["status"])
	assert.Equal(t, "shell-says-hi", doc.Steps[1]["outputs"].(map[string]any)["stdout"])
}

func TestAFailingRunExitsOneWithTheStepError(t *testing.T) {
	c := newCLI(t)
	pb := c.file("breaks.yaml", failingPlaybook)
	r := c.run("run", pb)
	require.Equal(t, 1, r.code, r)
	assert.Regexp(t, `(?m)step boom failed after \d+\.\d\ds: it broke on purpose \(failed\)$`, r.stdout)
	assert.Regexp(t, `(?m)^run \S+ failed after \d+\.\d\ds: step boom: it broke on purpose$`, r.stdout)
	assert.Contains(t, r.stdout, "step never skipped")
	assert.Contains(t, r.stderr, "Try: runbook runs show ")

	r = c.run("run", pb, "--output", "json")
	require.Equal(t, 1, r.code, r)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "stdout holds only the JSON document")
	assert.Equal(t, "failed", doc["run"].(map[string]any)["status"])
}

func TestRunRefusesInvalidInputsWithExitTwo(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	tests := []struct {
		name, arg, want string
	}{
		{"a value of the wrong type", "times=many", `input "times": must be an integer (got "many")`},
		{"an input the playbook does not declare", "color=red", `unknown input "color" (inputs: who, times)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run("run", pb, "-i", tt.arg)
			assert.Equal(t, 2, r.code, r)
			assert.Contains(t, r.stderr, tt.want)
			assert.Contains(t, r.stderr, "Try: runbook plan")
			assert.Empty(t, r.stdout)
		})
	}
}

func TestRunReadsInputsFromAFile(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	in := c.file("in.yaml", "who: from-file\ntimes: 3\n")
	r := c.run("run", pb, "--inputs", in, "-i", "times=4")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "greet: hello from-file times=4", "-i overrides the file")
}

func TestRunOfAnInvalidPlaybookPrintsDiagnosticsAndExitsTwo(t *testing.T) {
	c := newCLI(t)
	pb := c.file("bad.yaml", `version: 1
name: bad
steps:
  - id: a
    uses: log
    with: {mesage: hi}
`)
	r := c.run("run", pb)
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "bad.yaml:6:")
	assert.Contains(t, r.stderr, "mesage")
	assert.Contains(t, r.stderr, "Try: ")
	_, err := os.Stat(c.state)
	assert.True(t, os.IsNotExist(err), "an invalid playbook never opens the state file")
}

func TestRunIsQuietWithQuiet(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	r := c.run("run", "--quiet", pb)
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `^run \S+ succeeded in \S+\n$`, r.stdout)
}

func TestLockedStateFileFailsFastWithAClearError(t *testing.T) {
	c := newCLI(t)
	pb := c.file("slow.yaml", `version: 1
name: slow
steps:
  - id: nap
    uses: sleep
    with: {duration: 10s}
`)
	holder := exec.Command(bin, "run", pb)
	holder.Env, holder.Dir = c.env, c.dir
	out, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	buf := make([]byte, 4096)
	var seen strings.Builder
	for !strings.Contains(seen.String(), "step nap started") {
		n, err := out.Read(buf)
		require.NoError(t, err, "holder output so far: %s", seen.String())
		seen.Write(buf[:n])
	}

	// The runs verbs go through the holder's socket (local_test.go); a
	// second run cannot.
	r := c.run("run", pb)
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "in use by another process")
	assert.Equal(t, 1, strings.Count(r.stderr, "in use"), "said once: %s", r.stderr)
	assert.Contains(t, r.stderr, "Try: ")
	// bolt waits one second for the lock; the rest is process start-up,
	// with room for a loaded machine.
	assert.Less(t, r.took, 2500*time.Millisecond)

}

func TestRunningTheSamePlaybookTwiceKeepsSeparateRuns(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	a := runIDOf(t, c.run("run", pb).stdout)
	b := runIDOf(t, c.run("run", pb).stdout)
	assert.NotEqual(t, a, b)
	r := c.run("runs", "list", "--output", "json")
	var runs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &runs))
	assert.Len(t, runs, 2)
}

func TestRunMasksSecretsInEverythingItPrints(t *testing.T) {
	c := newCLI(t)
	pb := c.file("secret.yaml", `version: 1
name: secretive
steps:
  - id: use
    uses: log
    with: {message: "token is ${{ secrets.TOKEN }}"}
  - id: echo
    uses: shell
    with: {command: "echo $TOKEN_COPY", env: {TOKEN_COPY: "${{ secrets.TOKEN }}"}}
`)
	const value = "tok-9f8e7d6c5b4a"
	c.env = append(c.env, "RUNBOOK_SECRET_TOKEN="+value)
	r := c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "use: token is ***")
	id := runIDOf(t, r.stdout)
	for _, args := range [][]string{{"run", pb, "--output", "json"}, {"runs", "show", id, "--output", "json"}, {"runs", "logs", id}} {
		r := c.run(args...)
		require.Equal(t, 0, r.code, r)
		assert.NotContains(t, r.stdout+r.stderr, value, args)
	}
	raw, err := os.ReadFile(c.state)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(raw, []byte(value)), "the secret is in the bytes of the state file")

	c.env = withoutEnv(c.env, "RUNBOOK_SECRET_TOKEN")
	r = c.run("run", pb)
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "secret TOKEN is not set")
}
