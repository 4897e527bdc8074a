//go:build linux

package core

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/runbook/runbook/internal/steps"
)

// run runs c on the calling goroutine: the read ends of its stdout and
// stderr pipes and the pidfd of its process are waited on together with
// ppoll(2), and ctx's end signals the group from a context.AfterFunc.
// os/exec (runExec) copies each pipe on a goroutine of its own and
// watches ctx on a third; a step then paid for waking each of them and
// for the waiting goroutine's turn after them (about 0.1 ms a step in a
// chain of shell steps, where the process itself takes 0.7 ms).
func (c *command) run(ctx context.Context, out *steps.CommandOutput) (*os.ProcessState, error) {
	if !pidfds() {
		return c.runExec(ctx, out)
	}
	var pout, perr [2]int
	if err := syscall.Pipe2(pout[:], syscall.O_CLOEXEC); err != nil {
		return nil, &startError{err}
	}
	if err := syscall.Pipe2(perr[:], syscall.O_CLOEXEC); err != nil {
		closeFds(pout[:]...)
		return nil, &startError{err}
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdout, cmd.Stderr = os.NewFile(uintptr(pout[1]), "stdout"), os.NewFile(uintptr(perr[1]), "stderr")
	var stdin *os.File
	if c.stdin != "" {
		r, w, err := os.Pipe()
		if err != nil {
			closeFds(pout[0], pout[1], perr[0], perr[1])
			return nil, &startError{err}
		}
		cmd.Stdin, stdin = r, w
	}
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd}
	err := cmd.Start()
	// The child has its ends (or none): the parent's go.
	cmd.Stdout.(*os.File).Close()
	cmd.Stderr.(*os.File).Close()
	if stdin != nil {
		cmd.Stdin.(*os.File).Close()
	}
	if err != nil {
		closeFds(pout[0], perr[0])
		if stdin != nil {
			stdin.Close()
		}
		return nil, &startError{err}
	}
	if pidfd < 0 {
		// The clone gave none (it always does where pidfds() holds): one
		// for the process, not yet reaped, so it cannot name another.
		pidfd = pidfdOpen(cmd.Process.Pid)
	}
	if pidfd >= 0 {
		defer syscall.Close(pidfd)
	}
	if stdin != nil {
		// A command that never reads its stdin gets EPIPE or, once it
		// exited, the close below.
		go func() {
			_, _ = io.WriteString(stdin, c.stdin)
			stdin.Close()
		}()
	}

	pid := cmd.Process.Pid
	var killTimer *time.Timer
	signalled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(signalled)
		killTimer = killGroupAfter(pid, c.grace)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	})
	drainErr := c.drain(out, pout[0], perr[0], pidfd)
	if drainErr != nil {
		// It cannot be watched: it ends here, as a cancelled one would.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if stdin != nil {
		stdin.Close()
	}
	if !stop() {
		// The group was signalled: the rest of it goes before the
		// process is reaped, while its ID cannot name another group.
		<-signalled
		endGroup(killTimer, pid)
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		err = nil
	}
	if err == nil {
		err = drainErr
	}
	return cmd.ProcessState, err
}

// drain copies the pipes fdOut and fdErr to out until both are closed and
// the process (pidfd) has exited, or until waitDelay after its exit when
// a background child holds a pipe open; it closes fdOut and fdErr. It
// returns only when the process has exited (without a pidfd, -1: once
// both pipes are closed).
func (c *command) drain(out *steps.CommandOutput, fdOut, fdErr, pidfd int) error {
	buf, release := steps.CopyBuffer()
	defer release()
	fds := [3]pollFd{{fd: int32(fdOut), events: pollIn}, {fd: int32(fdErr), events: pollIn}, {fd: int32(pidfd), events: pollIn}}
	streams := [2]io.Writer{out.Stdout, out.Stderr}
	defer func() {
		for _, f := range fds[:2] {
			if f.fd >= 0 {
				syscall.Close(int(f.fd))
			}
		}
	}()
	for i := range 2 {
		if err := syscall.SetNonblock(int(fds[i].fd), true); err != nil {
			return err
		}
	}
	var deadline time.Time // once the process has exited
	for fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0 {
		timeout := time.Duration(-1)
		if !deadline.IsZero() {
			if timeout = time.Until(deadline); timeout <= 0 {
				return nil
			}
		}
		if err := ppoll(fds[:], timeout); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return os.NewSyscallError("ppoll", err)
		}
		for i := range 2 {
			if fds[i].fd < 0 || fds[i].revents == 0 {
				continue
			}
			// One read a stream a turn: neither starves the other.
			n, err := syscall.Read(int(fds[i].fd), buf)
			if n > 0 {
				_, _ = streams[i].Write(buf[:n])
				continue
			}
			if err == syscall.EAGAIN || err == syscall.EINTR {
				continue
			}
			syscall.Close(int(fds[i].fd)) // end of file, or a pipe that cannot be read
			fds[i].fd = -1
		}
		if fds[2].fd >= 0 && fds[2].revents != 0 {
			fds[2].fd = -1 // exited; ppoll skips a negative descriptor
			deadline = time.Now().Add(c.waitDelay())
		}
	}
	return nil
}

// pollFd is struct pollfd of poll(2).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1 // POLLIN; POLLHUP and POLLERR come unasked

// ppoll waits until one of fds is ready, or timeout passes (negative: no
// limit).
func ppoll(fds []pollFd, timeout time.Duration) error {
	var ts *syscall.Timespec
	if timeout >= 0 {
		t := syscall.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// sysPidfdOpen is pidfd_open(2)'s number, the same on every architecture
// (Linux 5.3).
const sysPidfdOpen = 434

// pidfdOpen returns a pidfd for process pid, -1 when the kernel gives none.
func pidfdOpen(pid int) int {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1
	}
	return int(fd)
}

// pidfds reports whether the kernel gives pidfds that poll(2) can wait on
// (Linux 5.3 and later; a process's pidfd is what run waits on).
var pidfds = sync.OnceValue(func() bool {
	fd := pidfdOpen(os.Getpid())
	if fd < 0 {
		return false
	}
	syscall.Close(fd)
	return true
})

func closeFds(fds ...int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}
