package benche2e

import (
	"context"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

// cpu reads the processor time the live replicas, this process (the
// senders, the receiver and the polls) and the PostgreSQL server have
// used so far.
func (c *Cluster) cpu() serveproc.Use {
	var pids []int
	for _, s := range c.Replicas {
		if s.Cmd.ProcessState == nil {
			pids = append(pids, s.Cmd.Process.Pid)
		}
	}
	return serveproc.ReadUse(pids, c.postmaster)
}

// findPostmaster sets the process of the PostgreSQL server c's database
// connection is to, or why it is not on this machine.
func (c *Cluster) findPostmaster(ctx context.Context) {
	c.postmaster, c.pmErr = serveproc.Postmaster(ctx, c.db)
}
