//go:build linux

package postgres

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// awaitAnswer waits in a system call, ppoll(2), until conn has bytes to
// read (or its peer closed it) or max passes, so that pgx's read that
// follows finds them (see sendWrite). A connection without a descriptor
// is not waited on.
func awaitAnswer(conn net.Conn, max time.Duration) {
	if t, ok := conn.(*tls.Conn); ok {
		conn = t.NetConn() // the record's bytes arrive on the socket
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		pfd := struct {
			fd             int32
			events, revent int16
		}{fd: int32(fd), events: 0x1} // POLLIN; POLLHUP and POLLERR come unasked
		ts := syscall.NsecToTimespec(int64(max))
		syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0) //nolint:errcheck // a wait only: pgx's read reports
	})
}
