package benche2e

import (
	"context"
	"time"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

// CPUUse is the processor time, user and system, that one run of a load
// took on average of each part of the measurement: the replicas, this
// process (the senders, the receiver and the polls), and the PostgreSQL
// server (its backends included; none on bbolt). On a machine that runs
// nothing else, the cores divided by their sum bound the runs a second.
type CPUUse struct {
	Serve    time.Duration
	Harness  time.Duration
	Database time.Duration
	// DatabaseErr says why Database was not measured: the server does not
	// run on this machine.
	DatabaseErr error
}

// All is the processor time of a run, every part together.
func (u CPUUse) All() time.Duration { return u.Serve + u.Harness + u.Database }

// Allows is the runs a second that cores allow at u a run.
func (u CPUUse) Allows(cores int) float64 {
	if u.All() <= 0 {
		return 0
	}
	return float64(cores) * float64(time.Second) / float64(u.All())
}

// cpuTotals is the processor time the parts have used so far.
type cpuTotals struct{ serve, harness, db time.Duration }

// cpu reads the processor time the live replicas, this process and the
// PostgreSQL server have used so far.
func (c *Cluster) cpu() cpuTotals {
	t := cpuTotals{harness: serveproc.SelfCPU()}
	for _, s := range c.Replicas {
		if s.Cmd.ProcessState == nil {
			d, _ := serveproc.CPU(s.Cmd.Process.Pid, false)
			t.serve += d
		}
	}
	if c.postmaster > 0 {
		t.db, _ = serveproc.CPU(c.postmaster, true)
	}
	return t
}

// perRun is the time used between before and t, a run for runs runs.
func (t cpuTotals) perRun(before cpuTotals, runs int, dbErr error) CPUUse {
	if runs <= 0 {
		return CPUUse{DatabaseErr: dbErr}
	}
	n := time.Duration(runs)
	return CPUUse{Serve: (t.serve - before.serve) / n, Harness: (t.harness - before.harness) / n,
		Database: (t.db - before.db) / n, DatabaseErr: dbErr}
}

// findPostmaster sets the process of the PostgreSQL server c's database
// connection is to, or why it is not on this machine.
func (c *Cluster) findPostmaster(ctx context.Context) {
	var backend int
	if c.pmErr = c.db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); c.pmErr == nil {
		c.postmaster, c.pmErr = serveproc.Postmaster(backend)
	}
}
