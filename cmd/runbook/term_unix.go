//go:build linux || darwin

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// termSize returns the terminal's columns and rows (80x24 when unknown).
func termSize(f *os.File) (width, height int) {
	ws, ok := winsize(f)
	if !ok || ws.col == 0 || ws.row == 0 {
		return envSize()
	}
	return int(ws.col), int(ws.row)
}

// isTTY reports whether f is a terminal: a character device that answers
// a terminal's ioctl (/dev/null, also a character device, does not).
func isTTY(f *os.File) bool {
	_, ok := winsize(f)
	return ok
}

// winsize asks terminal f for its size (TIOCGWINSZ), and reports whether
// it answered.
func winsize(f *os.File) (ws struct{ row, col, x, y uint16 }, ok bool) {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	return ws, errno == 0
}
