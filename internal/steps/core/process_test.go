package core

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// runners are the two ways a shell step runs its process: run (on Linux
// with pidfds, one ppoll on the step's goroutine) and runExec (os/exec,
// elsewhere). Both keep the same promises.
var runners = []struct {
	name string
	run  func(*command, context.Context, *steps.CommandOutput) (*os.ProcessState, error)
}{
	{"run", (*command).run},
	{"os/exec", (*command).runExec},
}

// runCommand runs script with /bin/sh through run, and returns its exit
// code, stdout and stderr (as the step's outputs keep them).
func runCommand(t *testing.T, run func(*command, context.Context, *steps.CommandOutput) (*os.ProcessState, error),
	ctx context.Context, c command) (int, string, string, error) {
	t.Helper()
	d, ok := steps.Lookup("shell")
	require.True(t, ok)
	out := steps.NewCommandOutput(stepstest.NewCall(t, d, map[string]any{"command": "true"}), 8<<20)
	ps, err := run(&c, ctx, out)
	out.Close()
	if err != nil {
		return 0, "", "", err
	}
	res, _ := out.Result(steps.CommandEnd{Code: ps.ExitCode(), Allowed: []int{0, 1, 2, 3, -1}})
	return ps.ExitCode(), res["stdout"].(string), res["stderr"].(string), nil
}

func sh(script string) command {
	return command{argv: []string{"/bin/sh", "-c", script}, grace: 100 * time.Millisecond}
}

func TestACommandsProcessKeepsItsPromisesEitherWay(t *testing.T) {
	ctx := context.Background()
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			t.Run("both streams arrive whole, interleaved past a pipe's buffer", func(t *testing.T) {
				code, stdout, stderr, err := runCommand(t, r.run, ctx, sh(
					`i=0; while [ $i -lt 3000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; exit 3`))
				require.NoError(t, err)
				assert.Equal(t, 3, code)
				outLines, errLines := strings.Split(stdout, "\n"), strings.Split(stderr, "\n")
				require.Len(t, outLines, 3000)
				require.Len(t, errLines, 3000)
				assert.Equal(t, "out 2999", outLines[2999])
				assert.Equal(t, "err 0", errLines[0])
			})
			t.Run("stdin arrives, and an unread one does not hold the command", func(t *testing.T) {
				c := sh("wc -c")
				c.stdin = strings.Repeat("x", 300<<10)
				_, stdout, _, err := runCommand(t, r.run, ctx, c)
				require.NoError(t, err)
				assert.Equal(t, strconv.Itoa(300<<10), strings.TrimSpace(stdout))

				c = sh("exit 0")
				c.stdin = strings.Repeat("x", 1<<20)
				start := time.Now()
				code, _, _, err := runCommand(t, r.run, ctx, c)
				require.NoError(t, err)
				assert.Equal(t, 0, code)
				assert.Less(t, time.Since(start), time.Second)
			})
			t.Run("a background child holding the pipes is left after grace and a second", func(t *testing.T) {
				start := time.Now()
				code, stdout, _, err := runCommand(t, r.run, ctx, sh("sleep 30 & echo $!"))
				elapsed := time.Since(start)
				require.NoError(t, err)
				if pid, err := strconv.Atoi(stdout); err == nil {
					defer syscall.Kill(pid, syscall.SIGKILL)
				}
				assert.Equal(t, 0, code)
				assert.GreaterOrEqual(t, elapsed, 1100*time.Millisecond, "the pipes are read for grace and a second after the exit")
				assert.Less(t, elapsed, 10*time.Second)
			})
			t.Run("no descriptor is left open", func(t *testing.T) {
				before := openFds(t)
				for range 20 {
					c := sh("echo out; echo err >&2")
					c.stdin = "in"
					_, _, _, err := runCommand(t, r.run, ctx, c)
					require.NoError(t, err)
					_, _, _, err = runCommand(t, r.run, ctx, command{argv: []string{"/nonexistent/program"}})
					require.Error(t, err)
				}
				assert.Eventually(t, func() bool { return openFds(t) == before }, 2*time.Second, 10*time.Millisecond,
					"descriptors: %d before, %d after", before, openFds(t))
			})
			t.Run("a missing program is a start error", func(t *testing.T) {
				_, _, _, err := runCommand(t, r.run, ctx, command{argv: []string{"/nonexistent/program"}})
				var se *startError
				assert.ErrorAs(t, err, &se)
			})
			t.Run("a cancel ends the group: SIGTERM, then SIGKILL after grace", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				code, _, _, err := runCommand(t, r.run, ctx, sh("trap '' TERM; sleep 30 & wait; sleep 30"))
				elapsed := time.Since(start)
				require.NoError(t, err)
				assert.Equal(t, -1, code, "killed by a signal")
				assert.GreaterOrEqual(t, elapsed, 300*time.Millisecond, "SIGKILL waits for the grace")
				assert.Less(t, elapsed, 5*time.Second)
			})
		})
	}
}

// openFds counts the process's open file descriptors.
func openFds(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}
