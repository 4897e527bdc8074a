//go:build !linux

package pgtest

import "syscall"

// serverProcAttr runs the server as cred, in a process group of its own.
// Only Linux has a parent-death signal: elsewhere a test binary killed
// (not one that ends, which stops its servers) leaves its server running
// until it is stopped by hand.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
