package ssh_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/ssh"
	"github.com/runbook/runbook/internal/steps/ssh/sshtest"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

type lineSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *lineSink) Line(stream, text string) {
	s.mu.Lock()
	s.lines = append(s.lines, stream+": "+text)
	s.mu.Unlock()
}

func (s *lineSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// hostOf is the inventory host of a test server, logging in with its
// client key and verifying its pinned host key.
func hostOf(s *sshtest.Server, name string) inventory.Host {
	return inventory.Host{Name: name, Address: s.Addr, User: s.User, HostKey: s.PublicKey(), PrivateKeySecret: "SSH_KEY_" + strings.ToUpper(name)}
}

// call builds an ssh step's call whose host knows the given inventory.
func call(t *testing.T, with map[string]any, hosts map[string]inventory.Host, keys map[string]string) (*steps.Call, *lineSink) {
	t.Helper()
	d, ok := steps.Lookup("ssh")
	require.True(t, ok)
	c := stepstest.NewCall(t, d, with)
	h := stepstest.HostOf(c)
	for name, hst := range hosts {
		settings, missing := hst.Settings(func(s string) (string, bool) { v, ok := keys[s]; return v, ok })
		require.Empty(t, missing)
		h.Connections[inventory.ConnectionName(name)] = settings
	}
	sink := &lineSink{}
	c.Output = sink
	return c, sink
}

func run(c *steps.Call) (steps.Outputs, error) {
	d, _ := steps.Lookup("ssh")
	return d.Run(context.Background(), c)
}

func TestACommandRunsOnTheHostAndItsLinesAreStreamed(t *testing.T) {
	t.Parallel()
	s := sshtest.Start(t, sshtest.Options{})
	hosts := map[string]inventory.Host{"web1": hostOf(s, "web1")}
	keys := map[string]string{"SSH_KEY_WEB1": s.ClientKey}

	t.Run("stdout and stderr lines reach the step's output, exit 0 succeeds", func(t *testing.T) {
		c, sink := call(t, map[string]any{"host": "web1", "command": "echo one; echo two >&2; printf three; echo \"$USER\" >&2"}, hosts, keys)
		out, err := run(c)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"stdout: one", "stderr: two", "stdout: three", "stderr: " + s.User}, sink.all())
		assert.Equal(t, "one\nthree", out["stdout"])
		assert.Equal(t, 0, out["exit_code"])
	})
	t.Run("stdin reaches the command, parse_json reads stdout", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "web1", "command": "cat", "stdin": `{"ok": true}`, "parse_json": true}, hosts, keys)
		out, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"ok": true}, out["json"])
	})
	t.Run("a non-zero exit fails the step with its code and last stderr line", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "web1", "command": "echo broken >&2; exit 3"}, hosts, keys)
		out, err := run(c)
		require.Error(t, err)
		assert.Equal(t, fault.Failed, fault.CodeOf(err))
		assert.Equal(t, "command exited with code 3: broken", err.Error())
		assert.Equal(t, 3, out["exit_code"])
	})
	t.Run("an allowed exit code succeeds", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "web1", "command": "exit 3", "allow_exit_codes": []any{0, 3}}, hosts, keys)
		out, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, 3, out["exit_code"])
	})
	t.Run("an inline address with a known_hosts file logs in too", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(s.KnownHostsLine()+"\n"), 0o600))
		c, _ := call(t, map[string]any{"address": s.Addr, "user": s.User, "known_hosts": filepath.Join(dir, "known_hosts"),
			"private_key_secret": "KEY", "argv": []any{"echo", "inline"}}, nil, nil)
		stepstest.HostOf(c).Secrets["KEY"] = s.ClientKey
		out, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, "inline", out["stdout"])
	})
}

// TestValuesReachTheRemoteCommandAsData: env values and argv words full
// of shell metacharacters are written to a file byte for byte, and
// nothing they spell runs.
func TestValuesReachTheRemoteCommandAsData(t *testing.T) {
	t.Parallel()
	s := sshtest.Start(t, sshtest.Options{})
	hosts := map[string]inventory.Host{"web1": hostOf(s, "web1")}
	keys := map[string]string{"SSH_KEY_WEB1": s.ClientKey}
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	value := "a'b\"c $(touch " + pwned + ") `touch " + pwned + "` ; touch " + pwned + " | & > < \\ \n* ${HOME} '\\''"

	t.Run("through env, as the loader passes a ${{ }} of command", func(t *testing.T) {
		file := filepath.Join(dir, "env.out")
		c, _ := call(t, map[string]any{"host": "web1", "command": `printf '%s' "${RB_INPUTS_V}" > ` + file,
			"env": map[string]any{"RB_INPUTS_V": value}}, hosts, keys)
		_, err := run(c)
		require.NoError(t, err)
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, []byte(value), got)
		assert.NoFileExists(t, pwned, "a value ran as shell code")
	})
	t.Run("through argv, each word quoted", func(t *testing.T) {
		file := filepath.Join(dir, "argv.out")
		c, _ := call(t, map[string]any{"host": "web1", "argv": []any{"sh", "-c", `printf '%s' "$1" > "$2"`, "sh", value, file}}, hosts, keys)
		_, err := run(c)
		require.NoError(t, err)
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, []byte(value), got)
		assert.NoFileExists(t, pwned, "a value ran as shell code")
	})
}

func TestAHostKeyThatIsNotTheKnownOneIsRefused(t *testing.T) {
	t.Parallel()
	s := sshtest.Start(t, sshtest.Options{})
	keys := map[string]string{"SSH_KEY_WEB1": s.ClientKey}
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := map[string]any{"host": "web1", "command": "touch " + marker}
	serverFP := fingerprint(t, s.HostKey)
	other := sshtest.Keygen(t, filepath.Join(t.TempDir(), "other"))
	otherFields := strings.Fields(other)
	dir := t.TempDir()

	refused := func(t *testing.T, h inventory.Host) error {
		t.Helper()
		c, _ := call(t, cmd, map[string]inventory.Host{"web1": h}, keys)
		_, err := run(c)
		require.Error(t, err)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "host web1 ("+s.Addr+")")
		assert.Contains(t, err.Error(), serverFP, "the message names the key's fingerprint")
		assert.NoFileExists(t, marker, "the command ran on a host whose key was refused")
		return err
	}
	t.Run("a host missing from known_hosts is refused", func(t *testing.T) {
		kh := filepath.Join(dir, "unknown")
		require.NoError(t, os.WriteFile(kh, []byte("[127.0.0.1]:1 "+otherFields[0]+" "+otherFields[1]+"\n"), 0o600))
		h := hostOf(s, "web1")
		h.HostKey, h.KnownHosts = "", kh
		err := refused(t, h)
		assert.Contains(t, err.Error(), "does not know")
	})
	t.Run("a changed key is refused with the line that knew the old one", func(t *testing.T) {
		kh := filepath.Join(dir, "changed")
		require.NoError(t, os.WriteFile(kh, []byte(fmtLine(s.Port, other)+"\n"), 0o600))
		h := hostOf(s, "web1")
		h.HostKey, h.KnownHosts = "", kh
		err := refused(t, h)
		assert.Contains(t, err.Error(), "the host's key changed")
		assert.Contains(t, err.Error(), kh+":1")
	})
	t.Run("a key other than the pinned one is refused", func(t *testing.T) {
		h := hostOf(s, "web1")
		h.HostKey = otherFields[0] + " " + otherFields[1]
		err := refused(t, h)
		assert.Contains(t, err.Error(), "not its pinned host_key")
	})
	t.Run("the right key in known_hosts is accepted", func(t *testing.T) {
		kh := filepath.Join(dir, "right")
		require.NoError(t, os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600))
		h := hostOf(s, "web1")
		h.HostKey, h.KnownHosts = "", kh
		c, _ := call(t, cmd, map[string]inventory.Host{"web1": h}, keys)
		_, err := run(c)
		require.NoError(t, err)
		assert.FileExists(t, marker)
	})
}

func TestAJumpHostCarriesTheConnection(t *testing.T) {
	t.Parallel()
	// The target lets in the jump host's key only: nothing else reaches it.
	jump := sshtest.Start(t, sshtest.Options{Forwarding: true})
	closed := sshtest.Start(t, sshtest.Options{})
	target := sshtest.Start(t, sshtest.Options{})
	keys := map[string]string{"SSH_KEY_BASTION": jump.ClientKey, "SSH_KEY_CLOSED": closed.ClientKey, "SSH_KEY_APP": target.ClientKey}
	app := hostOf(target, "app")
	app.Jump = "bastion"

	t.Run("through a jump host that forwards, the command runs", func(t *testing.T) {
		hosts := map[string]inventory.Host{"bastion": hostOf(jump, "bastion"), "app": app}
		c, _ := call(t, map[string]any{"host": "app", "command": "echo via bastion"}, hosts, keys)
		out, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, "via bastion", out["stdout"])
		assert.Contains(t, jump.Logs(), "Accepted publickey", "the bastion was logged in to")
	})
	t.Run("a jump host that forwards nothing stops it: the connection went through it", func(t *testing.T) {
		hosts := map[string]inventory.Host{"bastion": hostOf(closed, "bastion"), "app": app}
		hosts["bastion"] = inventory.Host{Name: "bastion", Address: closed.Addr, User: closed.User, HostKey: closed.PublicKey(), PrivateKeySecret: "SSH_KEY_CLOSED"}
		c, _ := call(t, map[string]any{"host": "app", "command": "echo via bastion"}, hosts, keys)
		_, err := run(c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "host app ("+target.Addr+"): connect through its jump host")
	})
	t.Run("the jump host's key is verified too", func(t *testing.T) {
		b := hostOf(jump, "bastion")
		b.HostKey = target.PublicKey()
		hosts := map[string]inventory.Host{"bastion": b, "app": app}
		c, _ := call(t, map[string]any{"host": "app", "command": "echo via bastion"}, hosts, keys)
		_, err := run(c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "host bastion ("+jump.Addr+") presented the key "+fingerprint(t, jump.HostKey))
	})
}

// TestATimeoutEndsTheStepAndTheRemoteCommand: a remote sleep 30 under a
// timeout ends the step within the timeout and the time the host takes to
// log in a second session (the one that stops it, as the test logs in as
// root, for whom sshd refuses the signal request), and the sleep is gone
// from the host.
func TestATimeoutEndsTheStepAndTheRemoteCommand(t *testing.T) {
	t.Parallel()
	s := sshtest.Start(t, sshtest.Options{})
	hosts := map[string]inventory.Host{"web1": hostOf(s, "web1")}
	keys := map[string]string{"SSH_KEY_WEB1": s.ClientKey}
	const sleep = "30.4242" // a duration no other process sleeps
	// A login takes seconds on a loaded machine (root's .bashrc runs for
	// every session): the timeout leaves room for it.
	const timeout = 10 * time.Second
	// The step stops the command with SIGTERM, then SIGKILL kill_grace
	// later: once in a full go test ./... at load 6 the TERM did not end
	// it and the KILL did, 5 s (the default grace) after the timeout.
	const grace = 2 * time.Second
	c, sink := call(t, map[string]any{"host": "web1", "command": "echo started; sleep " + sleep + "; echo woke",
		"timeout": timeout.String(), "kill_grace": grace.String()}, hosts, keys)

	start := time.Now()
	_, err := run(c)
	took := time.Since(start)
	require.Error(t, err)
	assert.Equal(t, fault.Timeout, fault.CodeOf(err))
	assert.Contains(t, sink.all(), "stdout: started", "the command had started")
	assert.NotContains(t, sink.all(), "stdout: woke")
	assert.Contains(t, err.Error(), "timed out after 10s; its session was closed")
	assert.Less(t, took, timeout+grace+3*time.Second, "the step ended long after its timeout and kill_grace; sshd said:\n%s", s.Logs())
	assert.Eventually(t, func() bool { return !sleeping(t, sleep) }, 3*time.Second, 50*time.Millisecond,
		"the remote sleep %s still runs after the step ended", sleep)
	t.Logf("step ended %s after it started (timeout %s)", took.Round(time.Millisecond), timeout)
}

// sleeping reports whether a process runs `sleep d`.
func sleeping(t *testing.T, d string) bool {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	want := []byte("sleep\x00" + d + "\x00")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.HasSuffix(b, want) {
			return true
		}
	}
	return false
}

func fmtLine(port int, pub string) string {
	f := strings.Fields(pub)
	return "[127.0.0.1]:" + itoa(port) + " " + f[0] + " " + f[1]
}

// TestOtherWaysToLogIn: an encrypted private key with its passphrase, and
// the ssh-agent of SSH_AUTH_SOCK for a host that allows it.
func TestOtherWaysToLogIn(t *testing.T) {
	dir := t.TempDir()
	enc := filepath.Join(dir, "enc")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "correct horse", "-C", "enc", "-f", enc).CombinedOutput()
	require.NoError(t, err, "%s", out)
	encPub, err := os.ReadFile(enc + ".pub")
	require.NoError(t, err)
	encKey, err := os.ReadFile(enc)
	require.NoError(t, err)
	agentKey := filepath.Join(dir, "agentkey")
	agentPub := sshtest.Keygen(t, agentKey)
	s := sshtest.Start(t, sshtest.Options{AuthorizedKeys: []string{strings.TrimSpace(string(encPub)), agentPub}})

	t.Run("an encrypted key logs in with its passphrase", func(t *testing.T) {
		h := hostOf(s, "web1")
		h.PassphraseSecret = "PASS"
		c, _ := call(t, map[string]any{"host": "web1", "command": "echo in"}, map[string]inventory.Host{"web1": h},
			map[string]string{"SSH_KEY_WEB1": string(encKey), "PASS": "correct horse"})
		got, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, "in", got["stdout"])
	})
	t.Run("an encrypted key without its passphrase says so", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "web1", "command": "echo in"}, map[string]inventory.Host{"web1": hostOf(s, "web1")},
			map[string]string{"SSH_KEY_WEB1": string(encKey)})
		_, err := run(c)
		require.Error(t, err)
		assert.Equal(t, "host web1 ("+s.Addr+"): the private key is encrypted: give passphrase_secret", err.Error())
	})
	t.Run("agent: true signs with the ssh-agent of SSH_AUTH_SOCK", func(t *testing.T) {
		sock := filepath.Join(dir, "agent.sock")
		agent := exec.Command("ssh-agent", "-D", "-a", sock)
		require.NoError(t, agent.Start())
		t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
		require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 5*time.Second, 20*time.Millisecond)
		add := exec.Command("ssh-add", agentKey)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := add.CombinedOutput()
		require.NoError(t, err, "%s", out)
		t.Setenv("SSH_AUTH_SOCK", sock)

		h := hostOf(s, "web1")
		h.PrivateKeySecret, h.Agent = "", true
		c, _ := call(t, map[string]any{"host": "web1", "command": "echo agent"}, map[string]inventory.Host{"web1": h}, nil)
		got, err := run(c)
		require.NoError(t, err)
		assert.Equal(t, "agent", got["stdout"])
	})
}

// TestAPasswordLogsIn: a host with password_secret logs in as a user
// that has that password (a throwaway user sshd checks against the
// system's shadow file), and a wrong password is refused as a login.
func TestAPasswordLogsIn(t *testing.T) {
	t.Parallel()
	s := sshtest.Start(t, sshtest.Options{Password: true})
	h := inventory.Host{Name: "pw", Address: s.Addr, User: s.PasswordUser, HostKey: s.PublicKey(), PasswordSecret: "SSH_PASSWORD"}
	hosts := map[string]inventory.Host{"pw": h}

	t.Run("the right password runs the command as its user", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "pw", "command": "id -un"}, hosts, map[string]string{"SSH_PASSWORD": s.Password})
		out, err := run(c)
		require.NoError(t, err, "sshd: %s", s.Logs())
		assert.Equal(t, s.PasswordUser, out["stdout"])
	})
	t.Run("a wrong password is refused as a login", func(t *testing.T) {
		c, _ := call(t, map[string]any{"host": "pw", "command": "id -un"}, hosts, map[string]string{"SSH_PASSWORD": s.Password + "x"})
		_, err := run(c)
		require.Error(t, err)
		assert.Equal(t, fault.Unauthorized, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "host pw ("+s.Addr+"): log in as "+s.PasswordUser)
		assert.NotContains(t, err.Error(), s.Password)
	})
}
