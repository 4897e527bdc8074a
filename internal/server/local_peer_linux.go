package server

import (
	"net"
	"syscall"
)

// peerCred asks the kernel who connected (SO_PEERCRED).
func peerCred(c *net.UnixConn) (pid, uid int, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *syscall.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err != nil || cerr != nil || cred == nil {
		return 0, 0, false
	}
	return int(cred.Pid), int(cred.Uid), true
}
