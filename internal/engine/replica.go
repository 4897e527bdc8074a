package engine

import (
	"context"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Process is the ID this engine records as the owner of the runs it
// executes (Options.Process, "host/pid" by default); a `runbook serve`
// replica is known to the others by it.
func (e *Engine) Process() string { return e.o.Process }

// takenOver reports whether the runs of owner, a process that is gone,
// are taken over by the replicas sharing st: owner was a replica. A run
// of any other process (`runbook run`) waits for an explicit resume.
func takenOver(st state.Store, owner string) bool {
	c, ok := st.(state.Coordinator)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	replica, err := c.IsReplica(ctx, owner)
	return err == nil && replica
}

// lockLeftBehind reports whether lock l, held by a run this process does
// not execute, was left by a process that is gone. In a store this process
// holds alone, every such lock was. In a store shared by replicas, only a
// lock whose process (Lock.Process) is a process of this host that no
// longer exists and was no replica: the run of a live process (a replica,
// another runbook run) holds its key, and so does the run of a dead
// replica, which another replica takes over.
func lockLeftBehind(st state.Store, l state.Lock) bool {
	if _, shared := st.(state.Coordinator); !shared {
		return true
	}
	return ownerGone(l.Process) && !takenOver(st, l.Process)
}
