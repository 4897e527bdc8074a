// Package serveproc is what the load commands under tools/ share: building
// the runbook binary, running `runbook serve` on loopback until it says
// where it listens, stopping it, and reading a process's memory and
// processor time from /proc (Linux).
package serveproc
