//go:build !linux

package serveproc

import "syscall"

// DeathSignal is empty: only Linux has a parent-death signal, and
// elsewhere a load command killed leaves its servers and agents running.
func DeathSignal() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
