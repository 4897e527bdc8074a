package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashPlaybook appends each finished shell step to a file; the middle
// sleep is where the process is killed.
const crashPlaybook = `
version: 1
name: crash
steps:
  - {id: one, uses: shell, with: {command: "echo one >> steps.txt"}}
  - {id: two, uses: shell, with: {command: "echo two >> steps.txt"}}
  - {id: nap, uses: sleep, with: {duration: 2s}}
  - {id: three, uses: shell, with: {command: "echo three >> steps.txt"}}
  - {id: four, uses: shell, with: {command: "echo four >> steps.txt"}}
`

// startUntil starts `runbook args...` and returns once a line of its plain
// output contains marker, with the run ID seen so far.
func (c *cli) startUntil(marker string, args ...string) (*exec.Cmd, string) {
	c.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	out, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	require.NoError(c.t, cmd.Start())
	c.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	id := ""
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			require.True(c.t, ok, "runbook exited before %q", marker)
			if m := runIDRe.FindStringSubmatch(line); m != nil && id == "" {
				id = m[1]
			}
			if strings.Contains(line, marker) {
				go func() {
					for range lines {
					}
				}()
				return cmd, id
			}
		case <-deadline:
			c.t.Fatalf("no %q within 10s", marker)
		}
	}
}

func TestKillDuringSleepThenResumeRunsEveryStepOnce(t *testing.T) {
	c := newCLI(t)
	pb := c.file("crash.yaml", crashPlaybook)
	cmd, id := c.startUntil("step nap started", "run", pb)
	require.NotEmpty(t, id)
	// The sleep's deadline is checkpointed right after it starts; give the
	// write a moment so the resume also proves the wait is not restarted.
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()

	got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(got), "the kill landed during the sleep")

	r := c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "running", "a killed run is left running, not marked finished")

	r = c.run("run", "--resume", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "run "+id+" succeeded")
	got, err = os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\nthree\nfour\n", string(got), "every finished step ran exactly once")
	assert.NotContains(t, r.stdout, "step one started")
	assert.NotContains(t, r.stdout, "step two started")
}

func TestSigintCancelsTheRunPersistsItAndRunsFinally(t *testing.T) {
	c := newCLI(t)
	pb := c.file("cancel.yaml", `
version: 1
name: cancel
steps:
  - {id: one, uses: shell, with: {command: "echo one >> steps.txt"}}
  - {id: nap, uses: sleep, with: {duration: 30s}}
  - {id: two, uses: shell, with: {command: "echo two >> steps.txt"}}
finally:
  - {id: cleanup, uses: shell, with: {command: "echo cleanup >> steps.txt"}}
`)
	cmd, id := c.startUntil("step nap started", "run", pb)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.ExitCode())

	r := c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"status": "cancelled"`)
	got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ncleanup\n", string(got), "finally ran after the cancellation")
}
