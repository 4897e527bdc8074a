package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type shellParams struct {
	Command        string            `json:"command" desc:"script run with /bin/sh -c (give command or argv)"`
	Argv           []string          `json:"argv" minlen:"1" desc:"program and arguments, run without a shell (give command or argv)"`
	Env            map[string]string `json:"env" desc:"environment variables added to the inherited ones"`
	InheritEnv     bool              `json:"inherit_env" default:"true" desc:"start from runbook's own environment"`
	Dir            string            `json:"dir" desc:"working directory, relative to the playbook's directory (default: that directory)"`
	Timeout        steps.Duration    `json:"timeout" desc:"kill the command after this long (default: no limit beyond the step's)"`
	Stdin          string            `json:"stdin" desc:"text written to the command's standard input"`
	MaxOutputBytes int               `json:"max_output_bytes" default:"1048576" min:"0" max:"67108864" desc:"bytes kept per stream (stdout, stderr) for parse_json; the rest is dropped. The stdout and stderr outputs keep the first mebibyte of them; the step's log has every line (runbook runs logs RUN STEP)"`
	ParseJSON      bool              `json:"parse_json" desc:"parse stdout as JSON into the json output"`
	AllowExitCodes []int             `json:"allow_exit_codes" default:"0" min:"0" max:"255" desc:"exit codes that count as success"`
	KillGrace      steps.Duration    `json:"kill_grace" default:"5s" max:"10m" desc:"time between SIGTERM and SIGKILL when cancelled"`
}

func init() {
	steps.Register(steps.Define(steps.Def[shellParams]{
		Type: "shell",
		Summary: "Run a command. It runs in its own process group; on cancel or timeout the group gets " +
			"SIGTERM, then SIGKILL after kill_grace.",
		Example: map[string]any{"command": "kubectl rollout status deployment/web", "timeout": "5m", "env": map[string]any{"KUBECONFIG": "kubeconfig.yaml"}},
		Outputs: []steps.Output{
			{Name: "exit_code", Type: "integer", Description: "exit code (-1 when killed by a signal)"},
			{Name: "stdout", Type: "string", Description: "standard output (its first mebibyte), one trailing newline removed"},
			{Name: "stderr", Type: "string", Description: "standard error (its first mebibyte), one trailing newline removed"},
			{Name: "json", Type: "any", Description: "stdout parsed as JSON when parse_json is set, else null"},
			{Name: "truncated", Type: "boolean", Description: "whether either stream exceeded max_output_bytes, or stdout or stderr was cut to its first mebibyte"},
			{Name: "duration_ms", Type: "integer", Description: "time the command ran"},
		},
		Scripts: []steps.Script{{Param: "command", Env: "env", Instead: `name the program and give the values as arguments (argv: [program, "${{ inputs.arg }}"])`}},
		Check:   checkShell,
		Run:     runShell,
	}))
}

func checkShell(p *shellParams, dynamic map[string]bool) []fault.Problem {
	hasCmd := p.Command != "" || dynamic["command"]
	hasArgv := p.Argv != nil || dynamic["argv"]
	var out []fault.Problem
	switch {
	case hasCmd && hasArgv:
		out = append(out, fault.Problem{Path: "argv", Message: "cannot be used with command; give one of them"})
	case !hasCmd && !hasArgv:
		out = append(out, fault.Problem{Path: "command", Message: "is required (or give argv)"})
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			out = append(out, fault.Problem{Path: "env", Message: fmt.Sprintf("invalid variable name %q", k)})
		}
	}
	return out
}

// recordedOutputBytes bounds the stdout and stderr outputs. They are kept
// in the step's record (runs show, a resume, later expressions), which a
// chatty command must not inflate: beyond this (the default of
// max_output_bytes) they are cut and truncated is true. Every line is in
// the step's output log (runs logs RUN STEP) whatever the cut, and
// parse_json reads all max_output_bytes.
const recordedOutputBytes = 1 << 20

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     []byte
	max     int
	dropped int64
}

func (w *capped) Write(p []byte) (int, error) {
	room := w.max - len(w.buf)
	if room >= len(p) {
		w.buf = append(w.buf, p...)
	} else {
		if room > 0 {
			w.buf = append(w.buf, p[:room]...)
		}
		w.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

// stream is where one of a command's streams goes: what max_output_bytes
// keeps, and every line to the step's output.
type stream struct {
	kept  *capped
	lines io.Writer
}

func (s *stream) Write(p []byte) (int, error) {
	s.kept.Write(p)
	return s.lines.Write(p)
}

// copyBuffers are the buffers streams read a command's pipes through. An
// exec.Cmd copies each pipe with io.Copy, which allocates 32 KiB a stream
// when its writer cannot read for itself: 64 KiB a step, most of a shell
// step's allocations.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom copies r to s through a pooled buffer; exec.Cmd's copy of a pipe
// lands here. The wrappers hide r's WriteTo and s's ReadFrom, either of
// which io.CopyBuffer would call instead of using the buffer.
func (s *stream) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{s}, struct{ io.Reader }{r}, *buf)
}

func runShell(ctx context.Context, c *steps.Call, p *shellParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, p.Timeout.Std())
		defer cancel()
	}
	var cmd *exec.Cmd
	if p.Argv != nil {
		cmd = exec.CommandContext(rctx, p.Argv[0], p.Argv[1:]...)
	} else {
		cmd = exec.CommandContext(rctx, "/bin/sh", "-c", p.Command)
	}
	dir, err := shellDir(c.Dir, p.Dir)
	if err != nil {
		return nil, err
	}
	cmd.Dir = dir
	if !p.InheritEnv || len(p.Env) > 0 {
		env := []string{}
		if p.InheritEnv {
			env = os.Environ()
		}
		for k, v := range p.Env {
			env = append(env, k+"="+v)
		}
		cmd.Env = env
	}
	if p.Stdin != "" {
		cmd.Stdin = strings.NewReader(p.Stdin)
	}
	stdout, stderr := &capped{max: p.MaxOutputBytes}, &capped{max: p.MaxOutputBytes}
	// Every line also goes to the run's step output as it is printed
	// (runbook run's progress, runs logs, the API's stream), whatever
	// max_output_bytes keeps for the outputs.
	outLines, errLines := c.OutputWriter(steps.StreamStdout), c.OutputWriter(steps.StreamStderr)
	cmd.Stdout, cmd.Stderr = &stream{stdout, outLines}, &stream{stderr, errLines}

	// Own process group: cancellation reaches the children of the shell too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	grace := p.KillGrace.Std()
	var killTimer *time.Timer
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		killTimer = time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return syscall.Kill(-pgid, syscall.SIGTERM)
	}
	// Bounds the wait for output pipes held open by a background child,
	// after the command exits or is cancelled.
	cmd.WaitDelay = grace + time.Second

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, &fault.Error{Code: fault.Failed, Message: "start command", Err: err}
	}
	waitErr := cmd.Wait()
	elapsed := time.Since(start)
	outLines.Close()
	errLines.Close()
	if killTimer != nil {
		killTimer.Stop()
		// The group had its SIGTERM; leave nothing of it behind.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rctx.Err() != nil {
		return nil, &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("command timed out after %s", p.Timeout),
			Data: map[string]any{"stderr": tail(stderr.buf, 1024)}}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return nil, &fault.Error{Code: fault.Failed, Message: "run command", Err: waitErr}
	}

	code := cmd.ProcessState.ExitCode()
	out := steps.Outputs{
		"exit_code":   code,
		"stdout":      trimNewline(head(stdout.buf, recordedOutputBytes)),
		"stderr":      trimNewline(head(stderr.buf, recordedOutputBytes)),
		"json":        nil,
		"truncated":   stdout.dropped > 0 || stderr.dropped > 0 || len(stdout.buf) > recordedOutputBytes || len(stderr.buf) > recordedOutputBytes,
		"duration_ms": elapsed.Milliseconds(),
	}
	if !exitAllowed(code, p.AllowExitCodes) {
		msg := fmt.Sprintf("command exited with code %d", code)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = "command was killed by " + ws.Signal().String()
		}
		if t := strings.TrimSpace(tail(stderr.buf, 200)); t != "" {
			msg += ": " + lastLine(t)
		}
		return out, &fault.Error{Code: fault.Failed, Message: msg,
			Data: map[string]any{"exit_code": code, "stderr": tail(stderr.buf, 1024)}}
	}
	if p.ParseJSON {
		if stdout.dropped > 0 {
			return out, &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("stdout is longer than max_output_bytes (%d) and cannot be parsed as JSON", p.MaxOutputBytes)}
		}
		var v any
		if err := json.Unmarshal(stdout.buf, &v); err != nil {
			return out, &fault.Error{Code: fault.Failed, Message: "stdout is not JSON", Err: err,
				Data: map[string]any{"stdout": tail(stdout.buf, 1024)}}
		}
		out["json"] = v
	}
	return out, nil
}

// shellDir resolves dir against the playbook's directory and checks it.
func shellDir(base, dir string) (string, error) {
	if dir == "" {
		dir = base
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	if dir == "" {
		return "", nil
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("dir %s is not a directory", dir)}
	}
	return dir, nil
}

func exitAllowed(code int, allowed []int) bool {
	if len(allowed) == 0 {
		return code == 0
	}
	for _, a := range allowed {
		if a == code {
			return true
		}
	}
	return false
}

func trimNewline(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b)
}

// head returns the first n bytes of b.
func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// tail returns the last n bytes of b as a string.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
