//go:build !(linux || darwin)

package main

import "os"

// termSize returns the terminal size from $COLUMNS and $LINES (80x24 when
// unset).
func termSize(*os.File) (width, height int) { return envSize() }

// isTTY reports whether f is a character device (a terminal, or a device
// such as the null device: without a terminal's ioctl here, the two are
// not told apart).
func isTTY(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
