package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// finishedStatuses are the statuses of a run DeleteRun deletes
// (state.RunStatus.Done).
var finishedStatuses = []string{
	string(state.RunSucceeded), string(state.RunFailed), string(state.RunCancelled), string(state.RunSkipped),
}

// DeleteRun deletes a finished run; its steps, events, intents and
// approvals go with it (their foreign keys cascade, and the trigger of
// migration 0003 deletes the events). The status is checked
// in the same statement, so a run that another process resumed meanwhile
// is not deleted: it is refused with state.ErrNotFinished, a run that does
// not exist with state.ErrNotFound. The playbook snapshot stays: other
// runs of the same source share it.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM runbook_runs WHERE id = $1 AND status = ANY($2)`, id, finishedStatuses)
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var status string
	err = s.pool.QueryRow(ctx, `SELECT status FROM runbook_runs WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("delete run %s: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	return fmt.Errorf("delete run %s: run is %s: %w", id, status, state.ErrNotFinished)
}
