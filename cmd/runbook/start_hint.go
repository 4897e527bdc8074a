package main

import (
	"strings"

	"github.com/runbook/runbook/internal/engine"
)

// startHint is the hint of a run that could not start: how to set the
// secrets it lacks, else where to see the inputs the playbook takes.
func startHint(err error, file string) string {
	missing := engine.MissingSecrets(err)
	if len(missing) == 0 {
		return "runbook plan " + file + " to see the inputs the playbook takes"
	}
	envs := make([]string, len(missing))
	for i, name := range missing {
		envs[i] = "RUNBOOK_SECRET_" + name + "=…"
	}
	return "export " + strings.Join(envs, " ") + " (or add " + strings.Join(missing, ", ") +
		" to a secrets file given with --secrets FILE), then run again"
}
