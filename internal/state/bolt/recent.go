package bolt

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// RecentRuns reads the by-created index from the newest run back, in one
// transaction, until each playbook of names has n runs or the index ends
// (a playbook with fewer runs than n has the whole index read: its
// entries, not its runs, are decoded).
func (s *Store) RecentRuns(ctx context.Context, names []string, n int) (map[string][]*state.Run, error) {
	out := map[string][]*state.Run{}
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	if n <= 0 || len(want) == 0 {
		return out, nil
	}
	left := len(want)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		snapshots, sources := map[string][]byte{}, sourcesOf(tx)
		runs := tx.Bucket(bucketRuns)
		c := tx.Bucket(bucketByCreated).Cursor()
		for k, v := c.Last(); k != nil && left > 0; k, v = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := decodeIndex(v)
			if err != nil {
				return err
			}
			if !want[e.Playbook] || len(out[e.Playbook]) >= n {
				continue
			}
			id := string(k[8:])
			data := runs.Get(k[8:])
			if data == nil {
				return fmt.Errorf("run %s is indexed but missing: %w", id, state.ErrCorrupt)
			}
			r, err := decodeRun(id, data, sources)
			if err != nil {
				return err
			}
			r = withSnapshot(tx, r, snapshots)
			r.Trigger = state.BriefTrigger(r.Trigger) // see state.Store.ListRuns
			out[e.Playbook] = append(out[e.Playbook], r)
			if len(out[e.Playbook]) == n {
				left--
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recent runs: %w", err)
	}
	return out, nil
}
