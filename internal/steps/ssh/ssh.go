package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

type sshParams struct {
	Host             string            `json:"host" desc:"a host of the config's hosts: inventory (or give address and user)"`
	Address          string            `json:"address" desc:"host or host:port to reach, port 22 by default, instead of an inventory host"`
	User             string            `json:"user" desc:"the user to log in as, with address"`
	HostKey          string            `json:"host_key" desc:"with address: the host's pinned public key (ssh-ed25519 AAAA…), as in known_hosts without the name"`
	KnownHosts       string            `json:"known_hosts" desc:"with address: a known_hosts file that must hold the host's key, relative to the playbook's directory"`
	PrivateKeySecret string            `json:"private_key_secret" desc:"with address: the secret holding the private key (PEM or OpenSSH)"`
	PassphraseSecret string            `json:"passphrase_secret" desc:"with address: the secret holding the private key's passphrase"`
	PasswordSecret   string            `json:"password_secret" desc:"with address: the secret holding the password"`
	Jump             string            `json:"jump" desc:"a host of the inventory to connect through (default: the inventory host's own jump)"`
	Command          string            `json:"command" desc:"script run with /bin/sh -c on the host (give command or argv)"`
	Argv             []string          `json:"argv" minlen:"1" desc:"program and arguments, each quoted as one word for the remote shell (give command or argv)"`
	Env              map[string]string `json:"env" desc:"variables exported before the command, each value quoted as one word"`
	Stdin            string            `json:"stdin" desc:"text written to the command's standard input"`
	Timeout          steps.Duration    `json:"timeout" desc:"stop the command and close the session this long after the step began to connect (default: no limit beyond the step's)"`
	ConnectTimeout   steps.Duration    `json:"connect_timeout" default:"15s" min:"1s" max:"5m" desc:"time to connect and log in, each hop"`
	MaxOutputBytes   int               `json:"max_output_bytes" default:"1048576" min:"0" max:"67108864" desc:"bytes kept per stream (stdout, stderr) for parse_json; the rest is dropped. The stdout and stderr outputs keep the first mebibyte of them; the step's log has every line (runbook runs logs RUN STEP)"`
	ParseJSON        bool              `json:"parse_json" desc:"parse stdout as JSON into the json output"`
	AllowExitCodes   []int             `json:"allow_exit_codes" default:"0" min:"0" max:"255" desc:"exit codes that count as success"`
	KillGrace        steps.Duration    `json:"kill_grace" default:"5s" max:"10m" desc:"time between SIGTERM and SIGKILL to the remote command when stopped"`
}

func init() {
	steps.Register(steps.Define(steps.Def[sshParams]{
		Type: "ssh",
		Summary: "Run a command on a host over SSH: a host of the config's hosts: inventory, or an address. The host's key " +
			"is always verified (a pinned key or known_hosts). On cancel or timeout the remote command and what it started get " +
			"SIGTERM, then SIGKILL after kill_grace, and the session is closed. See docs/agents.md.",
		Example: map[string]any{"host": "web1", "command": "systemctl reload nginx", "timeout": "2m"},
		Outputs: steps.CommandOutputs,
		Scripts: []steps.Script{{Param: "command", Env: "env", Instead: `name the program and give the values as arguments (argv: [program, "${{ inputs.arg }}"])`}},
		Check:   checkSSH,
		Run:     runSSH,
	}))
}

// envNameRE is a name the remote shell can export: it is written into the
// script, so nothing else is accepted.
var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func checkSSH(p *sshParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	hasCmd, hasArgv := p.Command != "" || dynamic["command"], p.Argv != nil || dynamic["argv"]
	switch {
	case hasCmd && hasArgv:
		out = append(out, fault.Problem{Path: "argv", Message: "cannot be used with command; give one of them"})
	case !hasCmd && !hasArgv:
		out = append(out, fault.Problem{Path: "command", Message: "is required (or give argv)"})
	}
	hasHost, hasAddr := p.Host != "" || dynamic["host"], p.Address != "" || dynamic["address"]
	switch {
	case hasHost && hasAddr:
		out = append(out, fault.Problem{Path: "address", Message: "cannot be used with host (an inventory host has its address); give one of them"})
	case !hasHost && !hasAddr:
		out = append(out, fault.Problem{Path: "host", Message: "is required: a host of the config's hosts: inventory (or give address and user)"})
	case hasAddr:
		out = append(out, checkInline(p, dynamic)...)
	default:
		for _, k := range []string{"user", "host_key", "known_hosts", "private_key_secret", "passphrase_secret", "password_secret"} {
			if inlineSet(p, k) {
				out = append(out, fault.Problem{Path: k, Message: "is the inventory host's (hosts: in the config); give it only with address"})
			}
		}
	}
	for k := range p.Env {
		if !envNameRE().MatchString(k) {
			out = append(out, fault.Problem{Path: "env", Message: fmt.Sprintf("invalid variable name %q: use letters, digits and '_', not starting with a digit", k)})
		}
	}
	return out
}

func checkInline(p *sshParams, dynamic map[string]bool) []fault.Problem {
	var out []fault.Problem
	if p.User == "" && !dynamic["user"] {
		out = append(out, fault.Problem{Path: "user", Message: "is required with address"})
	}
	hasKey, hasKnown := p.HostKey != "" || dynamic["host_key"], p.KnownHosts != "" || dynamic["known_hosts"]
	switch {
	case hasKey && hasKnown:
		out = append(out, fault.Problem{Path: "known_hosts", Message: "cannot be used with host_key; give one of them"})
	case !hasKey && !hasKnown:
		out = append(out, fault.Problem{Path: "host_key", Message: "is required with address (or known_hosts): a host's key is always verified"})
	case p.HostKey != "":
		if _, _, _, _, err := xssh.ParseAuthorizedKey([]byte(p.HostKey)); err != nil {
			out = append(out, fault.Problem{Path: "host_key", Message: "is not a public key (want e.g. ssh-ed25519 AAAA…): " + err.Error()})
		}
	}
	if p.PrivateKeySecret == "" && p.PasswordSecret == "" && !dynamic["private_key_secret"] && !dynamic["password_secret"] {
		out = append(out, fault.Problem{Path: "private_key_secret", Message: "is required with address (or password_secret)"})
	}
	return out
}

func inlineSet(p *sshParams, key string) bool {
	switch key {
	case "user":
		return p.User != ""
	case "host_key":
		return p.HostKey != ""
	case "known_hosts":
		return p.KnownHosts != ""
	case "private_key_secret":
		return p.PrivateKeySecret != ""
	case "passphrase_secret":
		return p.PassphraseSecret != ""
	}
	return p.PasswordSecret != ""
}

func runSSH(ctx context.Context, c *steps.Call, p *sshParams) (steps.Outputs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	token := newToken()
	script, err := remoteCommand(p, token)
	if err != nil {
		return nil, err
	}
	target, err := resolveTarget(c, p)
	if err != nil {
		return nil, err
	}
	rctx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, p.Timeout.Std())
		defer cancel()
	}
	client, closeAll, err := dial(rctx, target, p.ConnectTimeout.Std())
	if err != nil {
		return nil, stopped(ctx, rctx, p, err)
	}
	defer closeAll()
	sess, err := client.NewSession()
	if err != nil {
		return nil, stopped(ctx, rctx, p, &fault.Error{Code: fault.Unavailable, Message: "host " + target.label() + ": open a session", Err: err})
	}
	defer sess.Close()
	if p.Stdin != "" {
		sess.Stdin = strings.NewReader(p.Stdin)
	}
	out := steps.NewCommandOutput(c, p.MaxOutputBytes)
	sess.Stdout, sess.Stderr = out.Stdout, out.Stderr

	start := time.Now()
	if err := sess.Start(script); err != nil {
		out.Close()
		return nil, stopped(ctx, rctx, p, &fault.Error{Code: fault.Failed, Message: "host " + target.label() + ": start command", Err: err})
	}
	waitErr := wait(rctx, sess, startStopper(client, token), closeAll, p.KillGrace.Std())
	elapsed := time.Since(start)
	out.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if rctx.Err() != nil {
		return nil, &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("command on host %s timed out after %s; its session was closed", target.label(), p.Timeout),
			Data: map[string]any{"stderr": out.StderrTail(1024)}}
	}
	end := steps.CommandEnd{Elapsed: elapsed, Allowed: p.AllowExitCodes, ParseJSON: p.ParseJSON, MaxBytes: p.MaxOutputBytes}
	var exitErr *xssh.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		end.Code = exitErr.ExitStatus()
		if exitErr.Signal() != "" {
			end.Code, end.Signal = -1, "SIG"+exitErr.Signal()
		}
	default:
		return nil, &fault.Error{Code: fault.Unavailable, Message: "host " + target.label() + ": the session ended without an exit status", Err: waitErr,
			Data: map[string]any{"stderr": out.StderrTail(1024)}}
	}
	return out.Result(end)
}

// wait waits for the command to end. When ctx ends first the remote
// command gets SIGTERM, SIGKILL kill_grace later (stop), and the
// connection is closed killWait after that, which ends the wait.
func wait(ctx context.Context, sess *xssh.Session, st *stopper, closeAll func(), grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	for _, sig := range []xssh.Signal{xssh.SIGTERM, xssh.SIGKILL} {
		_ = sess.Signal(sig)
		st.send(sig)
		t := time.NewTimer(grace)
		if sig == xssh.SIGKILL {
			t.Reset(killWait)
		}
		select {
		case err := <-done:
			t.Stop()
			return err
		case <-t.C:
		}
	}
	closeAll()
	return <-done
}

// killWait is how long a SIGKILLed command has to end before the
// connection is closed anyway.
const killWait = 5 * time.Second

// A stopper stops the remote command and everything it started. The ssh
// "signal" request would (OpenSSH's sshd sends it to the session's
// process group) but sshd refuses it for a root login, so a second
// session, opened beside the command's, waits for a signal's name on its
// stdin and sends it to every process of the user whose environment holds
// the step's marker (on hosts with /proc and GNU grep). Opened at the
// start, its login is done by the time it is needed. It ends with the
// connection.
type stopper struct{ in io.WriteCloser }

// startStopper opens the stopping session; nil when the host refuses a
// second session (the signal request stays).
func startStopper(client *xssh.Client, token string) *stopper {
	ks, err := client.NewSession()
	if err != nil {
		return nil
	}
	in, err := ks.StdinPipe()
	if err != nil || ks.Start(stopScript(token)) != nil {
		ks.Close()
		return nil
	}
	return &stopper{in: in}
}

func (s *stopper) send(sig xssh.Signal) {
	if s != nil {
		_, _ = io.WriteString(s.in, string(sig)+"\n")
	}
}

// sessionVar marks the processes of one ssh step on its host: the step
// starts the remote shell with it, set to a token of its own.
const sessionVar = "RUNBOOK_SSH_SESSION"

// stopScript reads signal names (TERM, KILL) and sends each to every
// process of the user that carries token in sessionVar (GNU grep reads
// each /proc/PID/environ as NUL-separated lines). The marker is split so
// that the script's own command line never holds it; no process of it
// carries the variable.
//
// The processes are stopped (SIGSTOP) before the signal and continued
// after it, so that none runs between two of them: signalled one by one,
// a shell whose child the signal ended could run its next command before
// its own signal came (the glob lists /proc in name order, so a child's
// PID, which wraps at pid_max, may come first). Continued, each takes the
// pending signal before it runs anything.
func stopScript(token string) string {
	return `m=` + sessionVar + `=; m="$m"` + token + `
while read -r sig; do
  case $sig in TERM|KILL) ;; *) continue ;; esac
  ps=
  for f in $(grep -lzxF -- "$m" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; ps="$ps ${p%/environ}"
  done
  [ -n "$ps" ] || continue
  kill -STOP $ps 2>/dev/null; kill -"$sig" $ps 2>/dev/null; kill -CONT $ps 2>/dev/null
done`
}

// newToken is a random marker of one step's remote processes.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stopped turns an error met while connecting into the step's error: the
// context's when the step was cancelled, a timeout when timeout passed.
func stopped(ctx, rctx context.Context, p *sshParams, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if rctx.Err() != nil {
		return &fault.Error{Code: fault.Timeout, Message: fmt.Sprintf("timed out after %s before the command started", p.Timeout), Err: err}
	}
	return err
}

// remoteCommand is what the remote login shell runs: /bin/sh started
// with the step's marker (sessionVar) in its environment, running env
// exported, each value single-quoted, then the command, or argv quoted
// word by word. The whole script is one quoted word for the login shell.
func remoteCommand(p *sshParams, token string) (string, error) {
	var b strings.Builder
	names := make([]string, 0, len(p.Env))
	for k := range p.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !envNameRE().MatchString(k) {
			return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("env: invalid variable name %q", k)}
		}
		v := p.Env[k]
		if strings.IndexByte(v, 0) >= 0 {
			return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("env.%s: a shell variable cannot hold a NUL byte", k)}
		}
		b.WriteString("export " + k + "=" + quote(v) + "\n")
	}
	if p.Argv == nil {
		b.WriteString(p.Command)
	} else {
		for i, a := range p.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("argv[%d]: an argument cannot hold a NUL byte", i)}
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(quote(a))
		}
	}
	if strings.IndexByte(p.Command, 0) >= 0 {
		return "", &fault.Error{Code: fault.Invalid, Message: "command: a script cannot hold a NUL byte"}
	}
	return "exec env " + sessionVar + "=" + token + " /bin/sh -c " + quote(b.String()), nil
}

// quote makes s one word for an sh-like shell: single-quoted, each ' as '\”.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var _ io.Writer = (*steps.CommandStream)(nil)
