package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.StepOutput = (*Store)(nil)

// AppendOutput reserves the lines' numbers in runbook_output_runs and
// inserts them, in one transaction: an unknown run fails the reservation's
// foreign key (state.ErrNotFound) and leaves nothing written.
func (s *Store) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	if len(lines) == 0 {
		return nil
	}
	now := s.now()
	seqs := make([]int64, len(lines))
	steps := make([]string, len(lines))
	data := make([]string, len(lines))
	err := s.write(ctx, func(tx pgx.Tx) error {
		var last int64
		err := tx.QueryRow(ctx, `INSERT INTO runbook_output_runs (run_id, last_seq) VALUES ($1, $2)
ON CONFLICT (run_id) DO UPDATE SET last_seq = runbook_output_runs.last_seq + EXCLUDED.last_seq
RETURNING last_seq`, runID, len(lines)).Scan(&last)
		if err != nil {
			return err
		}
		first := last - int64(len(lines)) + 1
		for i := range lines { // reset on every run of fn (see write)
			lines[i].Seq = uint64(first) + uint64(i)
			if lines[i].Time.IsZero() {
				lines[i].Time = now
			}
			l := lines[i]
			l.Seq, l.Step = 0, ""
			b, err := json.Marshal(l)
			if err != nil {
				return err
			}
			seqs[i], steps[i], data[i] = int64(lines[i].Seq), lines[i].Step, string(b)
		}
		_, err = tx.Exec(ctx, `INSERT INTO runbook_output (run_id, seq, step, line)
SELECT $1, s, st, l::json FROM unnest($2::bigint[], $3::text[], $4::text[]) AS u (s, st, l)`, runID, seqs, steps, data)
		return err
	})
	if isForeignKeyViolation(err) {
		err = state.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("append output of run %s: %w", runID, err)
	}
	return nil
}

// Output reads the lines f selects; a run without any is told from an
// unknown run by a second query only when none is found.
func (s *Store) Output(ctx context.Context, runID string, f state.OutputFilter) ([]state.OutputLine, error) {
	limit := any(nil)
	if f.Limit > 0 {
		limit = f.Limit
	}
	q := `SELECT seq, step, line FROM runbook_output WHERE run_id = $1 AND seq > $2
AND ($3 = '' OR step = $3 OR starts_with(step, $3 || '[')) ORDER BY seq LIMIT $4`
	rows, err := s.pool.Query(ctx, q, runID, int64(f.After), f.Step, limit)
	if err != nil {
		return nil, fmt.Errorf("read output of run %s: %w", runID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.OutputLine, error) {
		var seq int64
		var step string
		var raw []byte
		if err := row.Scan(&seq, &step, &raw); err != nil {
			return state.OutputLine{}, err
		}
		var l state.OutputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return l, fmt.Errorf("%w: output line %d: %v", state.ErrCorrupt, seq, err)
		}
		l.Seq, l.Step = uint64(seq), step
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read output of run %s: %w", runID, err)
	}
	if len(out) == 0 {
		var one int
		err := s.pool.QueryRow(ctx, `SELECT 1 FROM runbook_runs WHERE id = $1`, runID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("read output of run %s: %w", runID, state.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read output of run %s: %w", runID, err)
		}
	}
	return out, nil
}
