package postgres

import (
	"sync"

	"github.com/runbook/runbook/internal/state"
)

// maxStoredSnapshots bounds storedSnapshots: a server sees one hash per
// version of each playbook it runs, far fewer.
const maxStoredSnapshots = 4096

// storedSnapshots are the hashes of the playbook snapshots this store saw
// committed to runbook_snapshots, so that a run's writes do not store its
// snapshot again: one statement less a write. Nothing deletes a snapshot;
// were one missing all the same (a database restored from a backup under
// a running server), a run's row would keep its own source
// (snapshotValue): a wrong entry costs space, never a source.
type storedSnapshots struct {
	mu     sync.Mutex
	hashes map[string]struct{}
}

// has reports whether the snapshot of hash was seen committed.
func (c *storedSnapshots) has(hash string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.hashes[hash]
	return ok
}

// add records that the snapshots of hashes were committed; "" is no
// snapshot. A full set starts again.
func (c *storedSnapshots) add(hashes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hashes {
		if h == "" {
			continue
		}
		if c.hashes == nil || len(c.hashes) >= maxStoredSnapshots {
			c.hashes = make(map[string]struct{})
		}
		c.hashes[h] = struct{}{}
	}
}

// sawRun records the snapshot of r, whose write committed, when it has
// one: the write stored it (storeSnapshotOf) or it was seen before.
func (c *storedSnapshots) sawRun(r *state.Run) {
	if hasSnapshot(r) {
		c.add(r.Hash)
	}
}

// hasSnapshot reports whether r carries a playbook snapshot that
// runbook_snapshots keeps under its hash.
func hasSnapshot(r *state.Run) bool { return r.Hash != "" && len(r.Snapshot) > 0 }
