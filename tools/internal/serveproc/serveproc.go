package serveproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Build compiles ./cmd/runbook (run from the repository root) into dir and
// returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "runbook")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/runbook")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build runbook: %w", err)
	}
	return bin, nil
}

// Server is a running `runbook serve`.
type Server struct {
	Cmd *exec.Cmd
	URL string // http://127.0.0.1:PORT
}

var listening = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// Start runs `bin serve args...` in dir with env, its stderr to stderr
// (nil: discarded), and waits up to wait for the line that says where it
// listens.
func Start(bin, dir string, args, env []string, stderr io.Writer, wait time.Duration) (*Server, error) {
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	// A load command killed or timed out leaves no server behind (on
	// Linux: DeathSignal).
	cmd.SysProcAttr = DeathSignal()
	cmd.Stderr = stderr
	if stderr == nil {
		cmd.Stderr = io.Discard
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-found:
		return &Server{Cmd: cmd, URL: u}, nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("runbook serve did not say where it listens within %s", wait)
	}
}

// Stop sends SIGTERM and waits for the process to end, killing it after
// 30 s.
func (s *Server) Stop() {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.Cmd.Process.Kill()
		<-done
	}
}

// RSS returns a process's resident set size and its peak (VmRSS, VmHWM),
// in KiB.
func RSS(pid int) (cur, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = n
		case "VmHWM:":
			peak = n
		}
	}
	return cur, peak, nil
}
