//go:build crashpoints && unix

package notice

import (
	"os"
	"syscall"
)

// crashpoint kills the process with SIGKILL when RUNBOOK_CRASHPOINT names
// this point: crash tests build the binary with -tags crashpoints to die at
// an exact place (after the post, before the cursor is saved). Absent from
// normal builds.
func crashpoint(name string) {
	if os.Getenv("RUNBOOK_CRASHPOINT") == name {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
