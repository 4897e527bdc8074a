package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// binPattern finds Debian's server binaries, one directory per version.
const binPattern = "/usr/lib/postgresql/*/bin"

// The bounds of the throwaway server's life.
const (
	initdbTimeout = 2 * time.Minute
	// readyTimeout bounds a start, and a restart's crash recovery: on a
	// busy machine with fsync on, a recovery after an immediate stop
	// took over a minute (Restart).
	readyTimeout = 3 * time.Minute
	stopTimeout  = 10 * time.Second
)

// dirPrefix names the server's directory; the test binary's pid follows,
// so a later binary can tell a directory left by a crash.
const dirPrefix = "runbook-pgtest-"

// findBinaries returns the bin directory of the newest version under
// pattern that has both initdb and postgres.
func findBinaries(pattern string) (string, error) {
	dirs, _ := filepath.Glob(pattern) // the pattern is well-formed
	var found []string
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("%w: %s is not set and there is no initdb and postgres under %s; "+
			"install the server (apt-get install postgresql) or set %s=postgres://user:password@host:port/db "+
			"(%s=1 or CI=true make this a failure instead of a skip)",
			errNoServer, EnvServer, pattern, EnvServer, EnvRequire)
	}
	slices.SortFunc(found, func(a, b string) int { return compareVersions(versionOf(a), versionOf(b)) })
	return found[len(found)-1], nil
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// versionOf returns the version directory of a bin directory
// (/usr/lib/postgresql/15/bin: "15").
func versionOf(bin string) string { return filepath.Base(filepath.Dir(bin)) }

// compareVersions orders dotted versions numerically ("9.6" before "15");
// a part that is not a number counts as 0.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// server is a throwaway PostgreSQL server: its directory, port, password
// and process.
type server struct {
	dir      string
	port     int
	password string
	proc     *os.Process
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // how it exited, once exited is closed
}

// startServer initializes a cluster in a new directory and runs it on a
// free port of 127.0.0.1 until stop.
func startServer(bin string) (*server, error) {
	removeStale()
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	s := &server{dir: dir, password: randomHex(16)}
	if err := s.initdb(bin, cred); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if err := s.start(bin, cred); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if err := s.waitReady(); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// serverUser returns the credential to run the server with: nil (the
// current user) unless the tests run as root, which PostgreSQL refuses;
// then the system user postgres.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the tests run as root, which PostgreSQL refuses, and there is no user \"postgres\" to run the server as (%w); "+
			"install Debian's postgresql package (it creates the user), run the tests as another user, or set %s", err, EnvServer)
	}
	uid, errU := strconv.ParseUint(u.Uid, 10, 32)
	gid, errG := strconv.ParseUint(u.Gid, 10, 32)
	if errU != nil || errG != nil {
		return nil, fmt.Errorf("user postgres has uid %q and gid %q: not numbers", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// own gives path to the server's user, when it is not the current one.
func own(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", path, err)
	}
	return nil
}

// initdb creates the cluster in dir/data with superuser runbook and the
// server's password (scram-sha-256 for every connection).
func (s *server) initdb(bin string, cred *syscall.Credential) error {
	// MkdirTemp made dir 0700; the server's user must own it to create
	// data/ and its socket in it.
	if err := own(s.dir, cred); err != nil {
		return err
	}
	pwfile := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	defer os.Remove(pwfile)
	if err := own(pwfile, cred); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), initdbTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"--pgdata", filepath.Join(s.dir, "data"), "--username", "runbook", "--pwfile", pwfile,
		"--auth", "scram-sha-256", "--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb in %s: %w\n%s", s.dir, err, tail(out.Bytes()))
	}
	return nil
}

// start runs postgres on a free port. The process runs in its own process
// group with a parent-death signal: SIGQUIT (an immediate shutdown) when
// the test binary dies. The kernel ties that signal to the thread that
// started the process, so the goroutine that starts it keeps its thread
// until the server exits.
func (s *server) start(bin string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	return s.run(bin, cred, port)
}

// run runs postgres on port, in its own process group with the
// parent-death signal start describes.
func (s *server) run(bin string, cred *syscall.Credential, port int) error {
	s.port = port
	logFile, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(s.dir, "data"),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=200",
		"-c", "logging_collector=off",
		"-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = serverProcAttr(cred)

	started := make(chan error, 1)
	s.proc, s.exited = nil, make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.proc = cmd.Process
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	err = <-started
	_ = logFile.Close() // the process has its own descriptor
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the server accepts connections, it exits, or
// readyTimeout passes.
func (s *server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgconn.Connect(ctx, s.url("postgres").String())
		cancel()
		if err == nil {
			return conn.Close(context.Background())
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited before accepting connections (%v):\n%s", s.waitErr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s (last: %v):\n%s", readyTimeout, err, s.logTail())
		}
	}
}

// url returns the URL of database name on the server.
func (s *server) url(name string) *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("runbook", s.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
}

// stop shuts the server down (fast: open connections are cut and their
// transactions rolled back), kills it if it has not exited within
// stopTimeout, and removes its directory.
func (s *server) stop() error {
	errStop := s.halt()
	if err := os.RemoveAll(s.dir); err != nil {
		return errors.Join(errStop, fmt.Errorf("remove server directory: %w", err))
	}
	return errStop
}

func (s *server) logTail() string {
	data, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return tail(data)
}

// tail returns the last lines of a log, enough to tell why a server failed.
func tail(data []byte) string {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// removeStale removes the server directories left by test binaries that
// no longer run (crashed or killed: their server died with them).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), dirPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
