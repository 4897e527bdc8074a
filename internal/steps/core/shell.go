package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		Outputs: steps.CommandOutputs,
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
	proc := command{argv: p.Argv, stdin: p.Stdin, grace: p.KillGrace.Std()}
	if p.Argv == nil {
		proc.argv = []string{"/bin/sh", "-c", p.Command}
	}
	dir, err := shellDir(c.Dir, p.Dir)
	if err != nil {
		return nil, err
	}
	proc.dir = dir
	if !p.InheritEnv || len(p.Env) > 0 {
		env := []string{}
		if p.InheritEnv {
			env = os.Environ()
		}
		for k, v := range p.Env {
			env = append(env, k+"="+v)
		}
		proc.env = env
	}
	out := steps.NewCommandOutput(c, p.MaxOutputBytes)

	start := time.Now()
	ps, err := proc.run(rctx, out)
	elapsed := time.Since(start)
	out.Close()
	var se *startError
	if errors.As(err, &se) {
		return nil, &fault.Error{Code: fault.Failed, Message: "start command", Err: se.err}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rctx.Err() != nil {
		return nil, &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("command timed out after %s", p.Timeout),
			Data: map[string]any{"stderr": out.StderrTail(1024)}}
	}
	if err != nil {
		return nil, &fault.Error{Code: fault.Failed, Message: "run command", Err: err}
	}

	end := steps.CommandEnd{Code: ps.ExitCode(), Elapsed: elapsed, Allowed: p.AllowExitCodes,
		ParseJSON: p.ParseJSON, MaxBytes: p.MaxOutputBytes}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		end.Signal = ws.Signal().String()
	}
	return out.Result(end)
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
