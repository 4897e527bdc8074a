package state

import (
	"fmt"
	"strings"
)

// RunStatuses are the statuses a run is shown with, in lifecycle order:
// every status a listing filters by (GET /api/v1/runs, runbook runs list,
// the UI's runs page). Interrupted is never stored (see RunInterrupted).
var RunStatuses = []RunStatus{RunPending, RunRunning, RunWaiting, RunSuspended, RunInterrupted,
	RunSucceeded, RunFailed, RunCancelled, RunSkipped}

// ParseRunStatus reads one of RunStatuses; an error names them all.
func ParseRunStatus(s string) (RunStatus, error) {
	for _, st := range RunStatuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown status %q (%s)", s, strings.Join(RunStatusNames(), ", "))
}

// RunStatusNames are RunStatuses as strings.
func RunStatusNames() []string {
	names := make([]string, len(RunStatuses))
	for i, st := range RunStatuses {
		names[i] = string(st)
	}
	return names
}
