// Package sshtest starts Debian's OpenSSH server (/usr/sbin/sshd) on a
// free loopback port for a test: a throwaway host key and client key made
// with ssh-keygen in t.TempDir(), a generated sshd_config, logins as the
// current user with that key only (and, with Options.Password, a
// throwaway user with a password). The server stops at the test's
// cleanup. Without sshd the test is skipped, except under CI=true (or
// RUNBOOK_REQUIRE_SSHD=1), where it fails: .ci/run installs
// openssh-server.
package sshtest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sshd is where Debian's openssh-server puts the server.
const Sshd = "/usr/sbin/sshd"

// Options shape a server.
type Options struct {
	// Forwarding allows direct-tcpip channels (AllowTcpForwarding yes):
	// a jump host needs it.
	Forwarding bool
	// AuthorizedKeys are more public keys (authorized_keys lines) that
	// may log in.
	AuthorizedKeys []string
	// Password makes a throwaway user (useradd, removed at the test's
	// cleanup) with a random password, and lets passwords log in. Only
	// root can: the test is skipped otherwise, and fails under CI.
	Password bool
}

// Server is a running sshd.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Port int
	// HostKey is the server's public host key as an authorized_keys line
	// ("ssh-ed25519 AAAA… comment"); HostKeyFile its private key.
	HostKey     string
	HostKeyFile string
	// User is the current user, whom the server lets in with ClientKey
	// (an OpenSSH private key, no passphrase); ClientKeyPub is its public
	// line.
	User         string
	ClientKey    string
	ClientKeyPub string
	Dir          string
	// PasswordUser logs in with Password (Options.Password).
	PasswordUser, Password string

	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncBuffer
}

// Require skips the test when sshd is missing, or fails it under CI.
func Require(t testing.TB) {
	t.Helper()
	for _, bin := range []string{Sshd, "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			msg := bin + " is missing: install Debian's openssh-server (.ci/run does)"
			if os.Getenv("CI") == "true" || os.Getenv("RUNBOOK_REQUIRE_SSHD") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// Start starts an sshd for t.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: dir, User: u.Username, HostKeyFile: filepath.Join(dir, "host_key")}
	s.HostKey = Keygen(t, s.HostKeyFile)
	s.ClientKeyPub = Keygen(t, filepath.Join(dir, "client_key"))
	b, err := os.ReadFile(filepath.Join(dir, "client_key"))
	if err != nil {
		t.Fatal(err)
	}
	s.ClientKey = string(b)
	keys := append([]string{s.ClientKeyPub}, o.AuthorizedKeys...)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd started by root wants its privilege separation directory,
		// which the Debian service makes at its start.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.Password {
		s.PasswordUser, s.Password = throwawayUser(t)
	}
	var lastErr error
	for range 5 {
		if lastErr = s.start(t, o); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("start sshd: %v", lastErr)
	return nil
}

// start runs sshd on a free port and waits for its banner.
func (s *Server) start(t testing.TB, o Options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	forwarding, password := "no", "no"
	if o.Forwarding {
		forwarding = "yes"
	}
	if o.Password {
		password = "yes"
	}
	conf := filepath.Join(s.Dir, "sshd_config")
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication %s
KbdInteractiveAuthentication no
AllowTcpForwarding %s
AllowAgentForwarding no
X11Forwarding no
PermitTunnel no
PrintMotd no
LogLevel VERBOSE
`, port, s.HostKeyFile, filepath.Join(s.Dir, "sshd.pid"), filepath.Join(s.Dir, "authorized_keys"), password, forwarding)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return err
	}
	s.logs = &syncBuffer{}
	cmd := exec.Command(Sshd, "-D", "-e", "-f", conf)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return fmt.Errorf("sshd exited: %s", s.logs.String())
		default:
		}
		if banner(s.Addr) {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("sshd did not answer on %s within 10s: %s", s.Addr, s.logs.String())
}

// throwawayUser adds a user with a random password and no home of its own
// (its home is the temporary directory, so that a login has one), and
// removes it at the test's cleanup.
func throwawayUser(t testing.TB) (name, password string) {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "a password login needs a throwaway user, which only root can add"
		if os.Getenv("CI") == "true" || os.Getenv("RUNBOOK_REQUIRE_SSHD") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name = "rbtest" + hex.EncodeToString(b[:4])
	password = hex.EncodeToString(b[4:]) + "-Pw"
	if out, err := exec.Command("useradd", "--no-create-home", "--home-dir", os.TempDir(), "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	set := exec.Command("chpasswd")
	set.Stdin = strings.NewReader(name + ":" + password + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd %s: %v: %s", name, err, out)
	}
	return name, password
}

// Stop stops the listening server; connections open then keep their own
// sshd process until they close.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Logs is what sshd printed (-e: its log on stderr).
func (s *Server) Logs() string { return s.logs.String() }

// Keygen makes an ed25519 key pair at path (path.pub) with ssh-keygen and
// returns the public line.
func Keygen(t testing.TB, path string) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "runbook-test", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(pub))
}

// KnownHostsLine is the known_hosts line for the server's host key.
func (s *Server) KnownHostsLine() string {
	f := strings.Fields(s.HostKey)
	return fmt.Sprintf("[127.0.0.1]:%d %s %s", s.Port, f[0], f[1])
}

// PublicKey is the host key as host_key takes it: type and base64.
func (s *Server) PublicKey() string {
	f := strings.Fields(s.HostKey)
	return f[0] + " " + f[1]
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// banner reports whether an SSH server answers at addr.
func banner(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// syncBuffer is a bytes.Buffer safe for sshd's writes and a test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
