package core_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func runShell(t testing.TB, ctx context.Context, with map[string]any) (*steps.Call, steps.Outputs, error) {
	t.Helper()
	d, ok := steps.Lookup("shell")
	require.True(t, ok)
	c := stepstest.NewCall(t, d, with)
	out, err := d.Run(ctx, c)
	return c, out, err
}

func TestShell(t *testing.T) {
	ctx := context.Background()

	t.Run("a command's output and exit code are returned", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": "echo out; echo err >&2"})
		require.NoError(t, err)
		assert.Equal(t, 0, out["exit_code"])
		assert.Equal(t, "out", out["stdout"], "one trailing newline is removed")
		assert.Equal(t, "err", out["stderr"])
		assert.Equal(t, false, out["truncated"])
		assert.Nil(t, out["json"])
	})
	t.Run("argv runs without a shell", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"argv": []any{"/bin/echo", "$HOME", "a b"}})
		require.NoError(t, err)
		assert.Equal(t, "$HOME a b", out["stdout"])
	})
	t.Run("a failing exit code fails with the stderr tail", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": "echo first >&2; echo 'no such thing' >&2; exit 3"})
		var se *fault.Error
		require.True(t, errors.As(err, &se), "err: %v", err)
		assert.Equal(t, fault.Failed, se.Code)
		assert.Equal(t, "command exited with code 3: no such thing", se.Message)
		assert.Equal(t, 3, se.Data["exit_code"])
		assert.Equal(t, "first\nno such thing\n", se.Data["stderr"])
		assert.Equal(t, 3, out["exit_code"])
	})
	t.Run("an allowed exit code succeeds", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": "exit 1", "allow_exit_codes": []any{0, 1}})
		require.NoError(t, err)
		assert.Equal(t, 1, out["exit_code"])
	})
	t.Run("env is added to the inherited environment", func(t *testing.T) {
		t.Setenv("RUNBOOK_TEST_INHERITED", "yes")
		_, out, err := runShell(t, ctx, map[string]any{"command": `echo "$RUNBOOK_TEST_INHERITED $EXTRA"`, "env": map[string]any{"EXTRA": "x y"}})
		require.NoError(t, err)
		assert.Equal(t, "yes x y", out["stdout"])
	})
	t.Run("inherit_env false starts from an empty environment", func(t *testing.T) {
		t.Setenv("RUNBOOK_TEST_INHERITED", "yes")
		_, out, err := runShell(t, ctx, map[string]any{"command": `echo "[$RUNBOOK_TEST_INHERITED][$ONLY]"`, "inherit_env": false, "env": map[string]any{"ONLY": "1"}})
		require.NoError(t, err)
		assert.Equal(t, "[][1]", out["stdout"])
	})
	t.Run("the command runs in the playbook directory by default", func(t *testing.T) {
		c, out, err := runShell(t, ctx, map[string]any{"command": "pwd -P"})
		require.NoError(t, err)
		want, _ := filepath.EvalSymlinks(c.Dir)
		assert.Equal(t, want, out["stdout"])
	})
	t.Run("a relative dir resolves against the playbook directory", func(t *testing.T) {
		d, _ := steps.Lookup("shell")
		c := stepstest.NewCall(t, d, map[string]any{"command": "cat f.txt", "dir": "sub"})
		require.NoError(t, os.Mkdir(filepath.Join(c.Dir, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "sub", "f.txt"), []byte("inside"), 0o600))
		out, err := d.Run(ctx, c)
		require.NoError(t, err)
		assert.Equal(t, "inside", out["stdout"])
	})
	t.Run("a missing dir is invalid", func(t *testing.T) {
		_, _, err := runShell(t, ctx, map[string]any{"command": "true", "dir": "nope"})
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
	})
	t.Run("stdin reaches the command", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": "tr a-z A-Z", "stdin": "shout"})
		require.NoError(t, err)
		assert.Equal(t, "SHOUT", out["stdout"])
	})
	t.Run("output beyond max_output_bytes is dropped and flagged", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": "yes | head -c 100000", "max_output_bytes": 10})
		require.NoError(t, err)
		assert.Equal(t, "y\ny\ny\ny\ny", out["stdout"])
		assert.Equal(t, true, out["truncated"])
	})
	t.Run("parse_json parses stdout", func(t *testing.T) {
		_, out, err := runShell(t, ctx, map[string]any{"command": `echo '{"a":[1,2]}'`, "parse_json": true})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"a": []any{1.0, 2.0}}, out["json"])
	})
	t.Run("parse_json fails on output that is not JSON", func(t *testing.T) {
		_, _, err := runShell(t, ctx, map[string]any{"command": "echo nope", "parse_json": true})
		assert.Equal(t, fault.Failed, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "stdout is not JSON")
	})
	t.Run("a missing program fails to start", func(t *testing.T) {
		_, _, err := runShell(t, ctx, map[string]any{"argv": []any{"/nonexistent/program"}})
		assert.Equal(t, fault.Failed, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "start command")
	})
	t.Run("the step's timeout kills the command", func(t *testing.T) {
		start := time.Now()
		_, _, err := runShell(t, ctx, map[string]any{"command": "sleep 10", "timeout": "100ms"})
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err), "err: %v", err)
	})
}

func TestShellKillsTheProcessGroup(t *testing.T) {
	t.Run("children of the shell die on cancel", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for i := 0; i < 200; i++ {
				if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		_, _, err := runShell(t, ctx, map[string]any{"command": "sleep 30 & echo $! > " + pidFile + "; wait"})
		assert.ErrorIs(t, err, context.Canceled)
		b, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		assert.Eventually(t, func() bool { return !alive(pid) }, 2*time.Second, 20*time.Millisecond, "background child %d still runs", pid)
	})
	t.Run("a command that ignores SIGTERM is killed after kill_grace", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := runShell(t, ctx, map[string]any{"command": "trap '' TERM; sleep 30 & wait; sleep 30", "kill_grace": "300ms"})
		elapsed := time.Since(start)
		assert.Error(t, err)
		assert.Less(t, elapsed, 3*time.Second)
		assert.GreaterOrEqual(t, elapsed, 450*time.Millisecond, "SIGKILL waits for the grace period")
	})
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestShellParams(t *testing.T) {
	d := desc(t, "shell")
	tests := []struct {
		name string
		with map[string]any
		want []string
	}{
		{"neither command nor argv is rejected", map[string]any{}, []string{"command: is required (or give argv)"}},
		{"both command and argv are rejected", map[string]any{"command": "ls", "argv": []any{"ls"}},
			[]string{"argv: cannot be used with command; give one of them"}},
		{"a dynamic command is enough", map[string]any{"command": steps.Dynamic{}}, nil},
		{"an empty argv is rejected", map[string]any{"argv": []any{}}, []string{"argv: must have at least 1 items (got 0)"}},
		{"a bad env name is rejected", map[string]any{"command": "ls", "env": map[string]any{"A=B": "x"}},
			[]string{`env: invalid variable name "A=B"`}},
		{"an output limit above 64 MiB is rejected", map[string]any{"command": "ls", "max_output_bytes": 1 << 27},
			[]string{"max_output_bytes: must be between 0 and 67108864 (got 134217728)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range d.CheckLiteral(tt.with) {
				got = append(got, p.Error())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A shell step reads its command's stdout and stderr through pooled
// buffers: each step allocated two fresh 32 KiB copy buffers before, 64 KiB
// of a step's 110 KB, which the garbage collector then had to sweep.
func TestShellStepsReuseTheirCopyBuffers(t *testing.T) {
	d, ok := steps.Lookup("shell")
	require.True(t, ok)
	c := stepstest.NewCall(t, d, map[string]any{"command": "echo out; echo err >&2"})
	run := func() {
		out, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		require.Equal(t, "out", out["stdout"])
		require.Equal(t, "err", out["stderr"])
	}
	run() // the pool's first buffers
	const n = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		run()
	}
	runtime.ReadMemStats(&after)
	perStep := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per shell step", perStep)
	assert.Less(t, perStep, uint64(32<<10), "a shell step allocates a copy buffer of its own")
}

// BenchmarkExecTrue is the floor BenchmarkShellTrue is compared with: the
// same command through os/exec directly. The step should add next to
// nothing (the engine's budget is 100 sequential `shell` steps in 0.2 s).
func BenchmarkExecTrue(b *testing.B) {
	for b.Loop() {
		var out, errb bytes.Buffer
		cmd := exec.Command("/bin/sh", "-c", "true")
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShellTrue(b *testing.B) {
	d, _ := steps.Lookup("shell")
	c := stepstest.NewCall(b, d, map[string]any{"command": "true"})
	for b.Loop() {
		if _, err := d.Run(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}
