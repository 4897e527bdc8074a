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

// replicaOf returns the kind of replica owner is (or was) on st, and
// whether its lease expired; kind is empty on a store without replicas,
// for an owner that never was one, or when the store cannot tell.
func replicaOf(st state.Store, owner string) (kind state.ReplicaKind, expired bool) {
	c, ok := st.(state.Coordinator)
	if !ok || owner == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kind, expired, err := c.Replica(ctx, owner)
	if err != nil {
		return "", false
	}
	return kind, expired
}

// lockLeftBehind reports whether lock l, held by a run this process does
// not execute, was left by a process that is gone. In a store this process
// holds alone, every such lock was. In a store shared by replicas, only a
// lock whose process (Lock.Process) is a process of this host that no
// longer exists and was no serve replica: the run of a live process (a
// replica, another runbook run) holds its key, and so does the run of a
// dead serve replica, which another replica takes over.
func lockLeftBehind(st state.Store, l state.Lock) bool {
	if _, shared := st.(state.Coordinator); !shared {
		return true
	}
	if !ownerGone(l.Process) {
		return false
	}
	kind, _ := replicaOf(st, l.Process)
	return kind != state.ReplicaServe
}
