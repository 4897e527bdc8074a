package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openPTY opens a pseudo-terminal and returns its terminal end.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno, "unlock the pseudo-terminal")
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno, "the pseudo-terminal's number")
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return pts
}

func TestOnlyATerminalGetsTheLiveDisplay(t *testing.T) {
	t.Setenv("TERM", "xterm")
	assert.True(t, isTerminal(openPTY(t)), "a pseudo-terminal")

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	fi, err := null.Stat()
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeCharDevice, "the null device is a character device")
	assert.False(t, isTerminal(null), "output sent to /dev/null gets the plain lines")

	f, err := os.Create(t.TempDir() + "/out")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a file")

	t.Setenv("TERM", "dumb")
	assert.False(t, isTerminal(openPTY(t)), "a terminal without cursor movement")
}
