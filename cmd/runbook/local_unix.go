//go:build linux || darwin

package main

import (
	"errors"
	"syscall"
)

// alive reports whether a process with pid exists (kill with signal 0).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
