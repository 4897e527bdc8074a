package core

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/runbook/runbook/internal/steps"
)

// command is a process a shell step runs: argv[0] with its arguments, in
// dir, with env (nil: runbook's own environment) and stdin written to its
// standard input. It runs in a process group of its own; when the run's
// context ends, the group gets SIGTERM, then SIGKILL after grace. Once the
// process has exited, its pipes are read for at most grace and a second
// more (a background child may hold them open), then left.
type command struct {
	argv  []string
	dir   string
	env   []string
	stdin string
	grace time.Duration
}

// startError is a command that could not start (no such program, a
// directory it may not enter).
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// waitDelay bounds the wait for the pipes once the process has exited.
func (c *command) waitDelay() time.Duration { return c.grace + time.Second }

// runExec runs c through os/exec, which copies each pipe on a goroutine
// of its own and watches ctx on another: where run has nothing quicker
// (not Linux, or a kernel without pidfds). It returns how the process
// ended, a *startError, or an error of the wait other than the exit code.
func (c *command) runExec(ctx context.Context, out *steps.CommandOutput) (*os.ProcessState, error) {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	if c.stdin != "" {
		cmd.Stdin = strings.NewReader(c.stdin)
	}
	cmd.Stdout, cmd.Stderr = out.Stdout, out.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var killTimer *time.Timer
	cmd.Cancel = func() error {
		killTimer = killGroupAfter(cmd.Process.Pid, c.grace)
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = c.waitDelay()
	if err := cmd.Start(); err != nil {
		return nil, &startError{err}
	}
	err := cmd.Wait()
	if killTimer != nil {
		endGroup(killTimer, cmd.Process.Pid)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) || errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	return cmd.ProcessState, err
}

// killGroupAfter sends SIGKILL to process group pgid after grace.
func killGroupAfter(pgid int, grace time.Duration) *time.Timer {
	return time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// endGroup leaves nothing of a cancelled command's group behind: it had
// its SIGTERM, and the SIGKILL that would have followed goes now.
func endGroup(killTimer *time.Timer, pgid int) {
	killTimer.Stop()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
