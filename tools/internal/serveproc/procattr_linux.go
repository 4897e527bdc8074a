package serveproc

import "syscall"

// DeathSignal has the kernel send a process started with it SIGTERM when
// the thread that started it ends: a load command killed leaves no
// server or agent behind.
func DeathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
