package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.StepOutput = (*Store)(nil)

// AppendOutput takes the lines' numbers in runbook_output_runs and
// inserts them as chunks (state.OutputChunk, one row each), in one
// statement (appendOutput): an unknown run fails the foreign keys
// (state.ErrNotFound) and leaves nothing written.
func (s *Store) AppendOutput(ctx context.Context, runID string, lines []state.OutputLine) error {
	if len(lines) == 0 {
		return nil
	}
	chunks, err := state.EncodeOutput(lines, s.now())
	var last int64
	if err == nil {
		err = s.write(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, appendOutput(), newOutputRows(chunks).args(runID)...).Scan(&last)
		})
	}
	if isForeignKeyViolation(err) {
		err = state.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("append output of run %s: %w", runID, err)
	}
	for i := range lines {
		lines[i].Seq += uint64(last) // numbered from 1 by EncodeOutput
	}
	return nil
}

// appendOutput inserts output chunks of run $1 after its last line,
// taking its next $2 line numbers (runbook_output_runs.last_seq): $3 and
// $4 are each chunk's first and last line counted from 1, $5 its step, $6
// the chunk (outputCTE, the part a write of step records makes of their
// Printed lines). It answers the run's last line before them.
var appendOutput = sync.OnceValue(func() string {
	return `WITH r AS (SELECT $1::text AS id)` + outputCTE(2) + `
SELECT last FROM o`
})

// outputRows are chunks of one run's lines (state.EncodeOutput) as
// appendOutput takes them.
type outputRows struct {
	firsts, lasts []int64
	steps, chunks []string
}

// newOutputRows returns chunks as appendOutput takes them (none: nil).
func newOutputRows(chunks []state.EncodedChunk) *outputRows {
	if len(chunks) == 0 {
		return nil
	}
	out := &outputRows{firsts: make([]int64, len(chunks)), lasts: make([]int64, len(chunks)),
		steps: make([]string, len(chunks)), chunks: make([]string, len(chunks))}
	for i, c := range chunks {
		out.firsts[i], out.lasts[i], out.steps[i], out.chunks[i] = int64(c.First), int64(c.Last), c.Step, string(c.Data)
	}
	return out
}

// args are appendOutput's arguments for o, of run runID: the lines it
// takes are as many as its last chunk's last line says.
func (o *outputRows) args(runID string) []any {
	return []any{runID, o.lasts[len(o.lasts)-1], o.firsts, o.lasts, o.steps, o.chunks}
}

// outputCTE is the WITH query o that appends the lines of the run that
// query r returns: it takes the run's next $first line numbers and
// inserts the chunks of the next four arguments (o.args without the
// run's ID) under them, none when r returns no run. o returns the run's
// last line before them.
func outputCTE(first int) string {
	n := func(i int) string { return "$" + strconv.Itoa(first+i) }
	return `, o AS (
	INSERT INTO runbook_output_runs (run_id, last_seq) SELECT r.id, ` + n(0) + ` FROM r
	ON CONFLICT (run_id) DO UPDATE SET last_seq = runbook_output_runs.last_seq + EXCLUDED.last_seq
	RETURNING run_id, last_seq - ` + n(0) + ` AS last
), oc AS (
	INSERT INTO runbook_output (run_id, seq, last_seq, step, chunk)
	SELECT o.run_id, o.last + u.s, o.last + u.l, u.st, u.c::json
	FROM o, unnest(` + n(1) + `::bigint[], ` + n(2) + `::bigint[], ` + n(3) + `::text[], ` + n(4) + `::text[]) AS u (s, l, st, c)
)`
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
