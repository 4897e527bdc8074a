//go:build linux

package engine

import (
	"bytes"
	"os"
	"strconv"
)

// processStart returns when process pid started, as the kernel counts it
// (clock ticks since boot, /proc/PID/stat's 22nd field), or "" when it
// cannot tell. With the pid it names one process for good: a pid is
// reused, its start never is.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 { // field 3 is f[0]; field 22 is f[19]
		return ""
	}
	return string(f[19])
}
