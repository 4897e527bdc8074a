package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Parse parses a run's playbook snapshot, sharing the result between the
// runs of one playbook version (the engine's Options.Playbooks.Parse).
func (r *Host) Parse(file string, src []byte) (*playbook.Playbook, error) {
	return r.cache.parse(file, src)
}

// Remember keeps pb (a playbook loaded from its file) for the runs of its
// version: Parse of its snapshot returns it.
func (r *Host) Remember(pb *playbook.Playbook) { r.cache.put(pb) }

// parseCache shares parsed snapshots between the runs of one playbook
// version: the engine re-parses a run's snapshot to resume it, and ten
// thousand waiting runs of one playbook need one parsed copy, not ten
// thousand. The engine never mutates a *playbook.Playbook.
type parseCache struct {
	mu sync.Mutex
	m  map[string]*playbook.Playbook // file + "\x00" + hash
}

const parseCacheMax = 1024

func (pc *parseCache) put(pb *playbook.Playbook) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil || len(pc.m) >= parseCacheMax {
		pc.m = map[string]*playbook.Playbook{}
	}
	pc.m[pb.Path+"\x00"+pb.Hash] = pb
}

func (pc *parseCache) parse(file string, src []byte) (*playbook.Playbook, error) {
	key := file + "\x00" + hashOf(src)
	pc.mu.Lock()
	pb, ok := pc.m[key]
	pc.mu.Unlock()
	if ok {
		return pb, nil
	}
	pb, err := playbook.Parse(file, src, playbook.LoadOptions{})
	if err != nil {
		return nil, err
	}
	pc.put(pb)
	return pb, nil
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// recordRetrier records who retried run (its trigger keeps the original
// run's) before it executes: whoever retries a run started it, for the
// rule that a run's starter may not approve it.
func (r *Host) recordRetrier(ctx context.Context, run *state.Run, by string) error {
	if by == "" {
		return nil
	}
	trig := make(map[string]any, len(run.Trigger)+1)
	for k, v := range run.Trigger {
		trig[k] = v
	}
	trig["retried_by"] = by
	run.Trigger = trig
	if err := r.store.SaveRun(ctx, run); err != nil {
		return fmt.Errorf("record who retried run %s: %w", run.ID, err)
	}
	return nil
}
