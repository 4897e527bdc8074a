package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// recentRuns reads the newest runs of each playbook in one query: one
// scan of the playbook index per name (a lateral join), at most n rows
// each.
const recentRuns = `SELECT r.id, r.record, COALESCE(r.snapshot, s.source)
FROM unnest($1::text[]) AS p(name)
CROSS JOIN LATERAL (
  SELECT id, record, snapshot, hash, created_ns FROM runbook_runs
  WHERE playbook = p.name
  ORDER BY created_ns DESC, id DESC
  LIMIT $2
) r
LEFT JOIN runbook_snapshots s ON r.snapshot IS NULL AND r.hash <> '' AND s.hash = r.hash
ORDER BY p.name, r.created_ns DESC, r.id DESC`

// RecentRuns returns the newest runs of each playbook of names, at most n
// of each, in one query.
func (s *Store) RecentRuns(ctx context.Context, names []string, n int) (map[string][]*state.Run, error) {
	out := map[string][]*state.Run{}
	if n <= 0 || len(names) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, recentRuns, names, n)
	if err != nil {
		return nil, fmt.Errorf("recent runs: %w", err)
	}
	var id string
	var record, snapshot []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &record, &snapshot}, func() error {
		r, err := decodeRun(id, record, snapshot)
		if err != nil {
			return err
		}
		r.Trigger = state.BriefTrigger(r.Trigger) // see state.Store.ListRuns
		out[r.Playbook] = append(out[r.Playbook], r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recent runs: %w", err)
	}
	return out, nil
}
