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
// inserts them as chunks (state.OutputChunk, one row each), in one
// transaction: an unknown run fails the reservation's foreign key
// (state.ErrNotFound) and leaves nothing written.
func (s *Store) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	if len(lines) == 0 {
		return nil
	}
	now := s.now()
	err := s.write(ctx, func(tx pgx.Tx) error {
		var last int64
		err := tx.QueryRow(ctx, `INSERT INTO runbook_output_runs (run_id, last_seq) VALUES ($1, $2)
ON CONFLICT (run_id) DO UPDATE SET last_seq = runbook_output_runs.last_seq + EXCLUDED.last_seq
RETURNING last_seq`, runID, len(lines)).Scan(&last)
		if err != nil {
			return err
		}
		first := uint64(last) - uint64(len(lines)) + 1
		for i := range lines { // reset on every run of fn (see write)
			lines[i].Seq = first + uint64(i)
			if lines[i].Time.IsZero() {
				lines[i].Time = now
			}
		}
		chunks, firsts := state.OutputChunks(lines)
		seqs, lasts := make([]int64, len(chunks)), make([]int64, len(chunks))
		steps, data := make([]string, len(chunks)), make([]string, len(chunks))
		for i, c := range chunks {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			seqs[i], lasts[i], steps[i], data[i] = int64(firsts[i]), int64(firsts[i])+int64(len(c.Texts))-1, c.Step, string(b)
		}
		_, err = tx.Exec(ctx, `INSERT INTO runbook_output (run_id, seq, last_seq, step, chunk)
SELECT $1, s, l, st, c::json FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS u (s, l, st, c)`, runID, seqs, lasts, steps, data)
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

// Output reads the chunks holding lines after f.After, in order, until it
// has f.Limit lines; a run without any is told from an unknown run by a
// second query only when none is found.
func (s *Store) Output(ctx context.Context, runID string, f state.OutputFilter) ([]state.OutputLine, error) {
	out, err := s.output(ctx, runID, f)
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

func (s *Store) output(ctx context.Context, runID string, f state.OutputFilter) ([]state.OutputLine, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, chunk FROM runbook_output WHERE run_id = $1 AND last_seq > $2
AND ($3 = '' OR step = $3 OR starts_with(step, $3 || '[')) ORDER BY seq`, runID, int64(f.After), f.Step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []state.OutputLine
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return nil, err
		}
		var c state.OutputChunk
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%w: output chunk %d: %v", state.ErrCorrupt, seq, err)
		}
		lines, err := c.Lines(uint64(seq))
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			if l.Seq <= f.After {
				continue
			}
			out = append(out, l)
			if f.Limit > 0 && len(out) >= f.Limit {
				return out, nil
			}
		}
	}
	return out, rows.Err()
}
