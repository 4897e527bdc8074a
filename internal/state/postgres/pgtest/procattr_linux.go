package pgtest

import "syscall"

// serverProcAttr runs the server as cred, in a process group of its own,
// and has the kernel send it SIGQUIT (an immediate shutdown) when the
// thread that started it ends: a test binary killed leaves no server
// behind. The caller starts it from a thread it locked.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
}
