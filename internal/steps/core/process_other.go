//go:build !linux

package core

import (
	"context"
	"os"

	"github.com/runbook/runbook/internal/steps"
)

// run runs c through os/exec (runExec): the polling of run on Linux needs
// pidfds.
func (c *command) run(ctx context.Context, out *steps.CommandOutput) (*os.ProcessState, error) {
	return c.runExec(ctx, out)
}
