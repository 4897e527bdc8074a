package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.ScheduleStore = (*Store)(nil)

// PauseSchedule records p, replacing the pause of its playbook and trigger.
func (s *Store) PauseSchedule(ctx context.Context, p state.SchedulePause) error {
	if p.At.IsZero() {
		p.At = s.now()
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", p.Playbook, err)
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO runbook_schedule_pauses (playbook, trigger, record) VALUES ($1, $2, $3)
ON CONFLICT (playbook, trigger) DO UPDATE SET record = EXCLUDED.record`, p.Playbook, p.Trigger, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", p.Playbook, err)
	}
	return nil
}

// ResumeSchedule deletes the pause of playbook's trigger and returns it.
func (s *Store) ResumeSchedule(ctx context.Context, playbook string, trigger int) (*state.SchedulePause, error) {
	var data []byte
	err := s.write(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `DELETE FROM runbook_schedule_pauses WHERE playbook = $1 AND trigger = $2 RETURNING record`,
			playbook, trigger).Scan(&data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", playbook, err)
	}
	var p state.SchedulePause
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w: %v", playbook, state.ErrCorrupt, err)
	}
	return &p, nil
}

// SchedulePauses returns the pauses of playbook ("": every playbook).
func (s *Store) SchedulePauses(ctx context.Context, playbook string) ([]state.SchedulePause, error) {
	rows, err := s.pool.Query(ctx, `SELECT record FROM runbook_schedule_pauses
WHERE $1 = '' OR playbook = $1 ORDER BY playbook, trigger`, playbook)
	if err != nil {
		return nil, fmt.Errorf("list schedule pauses: %w", classify(err))
	}
	defer rows.Close()
	var out []state.SchedulePause
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("list schedule pauses: %w", classify(err))
		}
		var p state.SchedulePause
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("list schedule pauses: %w: %v", state.ErrCorrupt, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedule pauses: %w", classify(err))
	}
	return out, nil
}
