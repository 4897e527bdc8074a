package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.RunPauseStore = (*Store)(nil)

// pauseSelector is the unique selector column of a run pause: its pattern
// or its label, told apart.
func pauseSelector(p state.RunPause) string {
	if p.Label != "" {
		return "label:" + p.Label
	}
	return "name:" + p.Pattern
}

// PauseRuns records p unless its ID or selector is recorded already; the
// table's trigger tells the replicas.
func (s *Store) PauseRuns(ctx context.Context, p state.RunPause) error {
	if p.At.IsZero() {
		p.At = s.now()
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pause runs of %s: %w", p.Selector(), err)
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO runbook_run_pauses (id, selector, at_ns, record) VALUES ($1, $2, $3, $4)`,
			p.ID, pauseSelector(p), p.At.UnixNano(), data)
		return err
	})
	if isUniqueViolation(err, "runbook_run_pauses_pkey") || isUniqueViolation(err, "runbook_run_pauses_selector_key") {
		err = state.ErrExists
	}
	if err != nil {
		return fmt.Errorf("pause runs of %s: %w", p.Selector(), err)
	}
	return nil
}

// ResumeRuns deletes pause id and returns it; the table's trigger tells
// the replicas.
func (s *Store) ResumeRuns(ctx context.Context, id string) (*state.RunPause, error) {
	var data []byte
	err := s.write(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `DELETE FROM runbook_run_pauses WHERE id = $1 RETURNING record`, id).Scan(&data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resume runs (pause %s): %w", id, err)
	}
	var p state.RunPause
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("resume runs (pause %s): %w: %v", id, state.ErrCorrupt, err)
	}
	return &p, nil
}

// RunPauses returns the pauses, oldest first.
func (s *Store) RunPauses(ctx context.Context) ([]state.RunPause, error) {
	rows, err := s.pool.Query(ctx, `SELECT record FROM runbook_run_pauses ORDER BY at_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("list run pauses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.RunPause, error) {
		var data []byte
		var p state.RunPause
		if err := row.Scan(&data); err != nil {
			return p, err
		}
		if err := json.Unmarshal(data, &p); err != nil {
			return p, fmt.Errorf("%w: run pause: %v", state.ErrCorrupt, err)
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list run pauses: %w", err)
	}
	return out, nil
}
