//go:build unix

package engine

import (
	"errors"
	"syscall"
)

// processExists reports whether process pid exists on this host (one of
// another user counts).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
