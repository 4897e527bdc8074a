package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// SaveStep writes one step record and appends events, in one transaction
// and one round trip.
// It fails with state.ErrNotFound when the run does not exist.
func (s *Store) SaveStep(ctx context.Context, rec *state.StepRecord, events ...state.Event) error {
	return s.SaveSteps(ctx, []*state.StepRecord{rec}, events...)
}

// SaveSteps writes several step records of one run and appends events and
// the records' Printed output, in one transaction. A step given twice is
// saved once, at the place of its first record, with its last. A write ctx
// fences that the fence refuses fails with a *state.FencedError, writing
// nothing (AppendEvents too).
func (s *Store) SaveSteps(ctx context.Context, recs []*state.StepRecord, events ...state.Event) error {
	if len(recs) == 0 {
		return nil
	}
	runID := recs[0].RunID
	rows, err := encodeSteps(recs, s.now())
	if err != nil {
		return err
	}
	evs, err := s.encodeEvents(events)
	if err != nil {
		return fmt.Errorf("save steps of run %s: %w", runID, err)
	}
	err = s.writeRun(ctx, runID, func(b *pgx.Batch) { queueSaveSteps(b, runID, evs, rows) })
	if err != nil {
		if len(recs) == 1 {
			return fmt.Errorf("save step %s/%s: %w", runID, recs[0].ID, err)
		}
		return fmt.Errorf("save %d steps of run %s: %w", len(recs), runID, err)
	}
	return nil
}

// stepRows are step records of one run as stepsCTE takes them, and
// the output they carry (Printed) as appendOutput does.
type stepRows struct {
	ids, statuses []string
	records       [][]byte
	printed       *outputRows
}

// encodeSteps encodes step records of one run, a step given twice once,
// at the place of its first record, with its last, and the lines each
// printed, a zero time set to now.
func encodeSteps(recs []*state.StepRecord, now time.Time) (*stepRows, error) {
	printed, err := state.EncodeOutput(state.PrintedOutput(recs), now)
	if err != nil {
		return nil, err
	}
	rows := &stepRows{printed: newOutputRows(printed)}
	at := map[string]int{}
	for _, rec := range recs {
		if rec.RunID != recs[0].RunID {
			return nil, fmt.Errorf("save steps: records of runs %s and %s in one call", recs[0].RunID, rec.RunID)
		}
		data, err := appendStep(make([]byte, 0, 256), rec)
		if err != nil {
			return nil, fmt.Errorf("save step %s/%s: encode: %w", rec.RunID, rec.ID, err)
		}
		if i, ok := at[rec.ID]; ok { // one statement cannot write a row twice
			rows.statuses[i], rows.records[i] = string(rec.Status), data
			continue
		}
		at[rec.ID] = len(rows.ids)
		rows.ids, rows.statuses, rows.records = append(rows.ids, rec.ID), append(rows.statuses, string(rec.Status)), append(rows.records, data)
	}
	return rows, nil
}

// queueSaveSteps queues into b the one statement that appends the events
// evs (encoded) of run runID and writes its step records rows (nil: none)
// with the lines they printed (see saveStepsStatement). It fails with
// state.ErrNotFound, writing nothing, when the run does not exist.
// Taking the event numbers (last_seq) locks the run's row until the
// transaction ends, so writers of one run, on any replica, number their
// events one after the other, without gaps.
func queueSaveSteps(b *pgx.Batch, runID string, evs [][]byte, rows *stepRows) {
	args := []any{runID}
	if len(evs) > 0 {
		args = append(args, len(evs), evs)
	}
	args, steps, output := rows.appendArgs(args, runID)
	b.Queue(saveStepsStatement(len(evs) > 0, steps, output), args...).QueryRow(func(row pgx.Row) error {
		return runFound(row, runID)
	})
}

// appendArgs appends to args the arguments of the parts of a write's
// statement that rows (nil: none) has, in their order (recordsCTEs): the
// step records, and the lines they printed; and reports which it has.
func (rows *stepRows) appendArgs(args []any, runID string) (_ []any, steps, output bool) {
	steps = rows != nil && len(rows.ids) > 0
	if steps {
		args = append(args, rows.ids, rows.statuses, rows.records)
	}
	output = rows != nil && rows.printed != nil
	if output {
		args = append(args, rows.printed.args(runID)[1:]...)
	}
	return args, steps, output
}

// recordsCTEs returns the WITH queries of a write's step records
// (stepsCTE, steps) and of the lines they printed (outputCTE, output),
// their arguments from $next on.
func recordsCTEs(steps, output bool, next int) string {
	q := ""
	if steps {
		q += stepsCTE(next)
		next += 3
	}
	if output {
		q += outputCTE(next)
	}
	return q
}

// saveStepsStatements are the statements saveStepsStatement returns, by
// what they write (variant).
var saveStepsStatements = sync.OnceValue(func() (stmts [8]string) {
	for v := range stmts {
		stmts[v] = buildSaveSteps(v&1 != 0, v&2 != 0, v&4 != 0)
	}
	return stmts
})

// saveStepsStatement returns the one statement that writes step records
// of run $1 and appends its events: with events, the reservation of $2
// event numbers (reserve) and the events $3 as withEvents appends them;
// without, the run's row read; then, only when the run exists, the step
// records of the next three arguments (steps) as stepsCTE writes
// them and the lines they printed in the next five (output) as
// outputCTE appends them. It answers how many runs it found: 0 when
// the run does not exist. One statement where up to three were (see
// saveRunStatement).
func saveStepsStatement(events, steps, output bool) string {
	return saveStepsStatements()[variant(events, steps, output)]
}

func buildSaveSteps(events, steps, output bool) string {
	q := `WITH r AS (SELECT id FROM runbook_runs WHERE id = $1)`
	next := 2
	if events {
		q = runQuery(reserve) + eventsCTE(2, 3)
		next = 4
	}
	return q + recordsCTEs(steps, output, next) + `
SELECT count(*) FROM r`
}

// eventsCTE is the WITH query that inserts the events $evArg of the run
// that query r returns (see insertEvents).
func eventsCTE(nArg, evArg int) string {
	return `, e AS (
` + insertEvents(nArg, evArg) + `
)`
}

// stepsCTE is the WITH query that upserts the step records $first (ids),
// $first+1 (statuses) and $first+2 (records) of the run that query r
// returns, in the order given (a new step draws its ord then, a saved one
// keeps its own), none when r returns no run.
func stepsCTE(first int) string {
	a, b, c := strconv.Itoa(first), strconv.Itoa(first+1), strconv.Itoa(first+2)
	return `, s AS (
	INSERT INTO runbook_steps (run_id, step_id, status, record)
	SELECT r.id, s.id, s.status, s.record
	FROM r, unnest($` + a + `::text[], $` + b + `::text[], $` + c + `::json[]) WITH ORDINALITY AS s(id, status, record, n)
	ORDER BY s.n
	ON CONFLICT (run_id, step_id) DO UPDATE SET status = EXCLUDED.status, record = EXCLUDED.record
)`
}

// runFound reads a count of runs written (row) and answers
// state.ErrNotFound for none.
func runFound(row pgx.Row, runID string) error {
	var n int
	if err := row.Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
	}
	return nil
}

// GetStep returns one step record or state.ErrNotFound.
func (s *Store) GetStep(ctx context.Context, runID, stepID string) (*state.StepRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get step %s/%s: %w", runID, stepID, err)
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM runbook_steps WHERE run_id = $1 AND step_id = $2`, runID, stepID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("step %s: %w", stepID, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get step %s/%s: %w", runID, stepID, err)
	}
	rec, err := decodeStep(data)
	if err != nil {
		return nil, fmt.Errorf("get step %s/%s: %w", runID, stepID, err)
	}
	return rec, nil
}

// Steps returns a run's step records in the order they were first saved,
// or state.ErrNotFound when the run does not exist. One query: a run
// without steps is one row without a record, an unknown run no row.
func (s *Store) Steps(ctx context.Context, runID string) ([]*state.StepRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", runID, err)
	}
	if kept, ok := s.claims.claimedSteps(runID); ok {
		out := make([]*state.StepRecord, 0, len(kept))
		for _, data := range kept {
			rec, err := decodeStep(data)
			if err != nil {
				return nil, fmt.Errorf("steps of run %s: %w", runID, err)
			}
			out = append(out, rec)
		}
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT s.record FROM runbook_runs r
LEFT JOIN runbook_steps s ON s.run_id = r.id
WHERE r.id = $1
ORDER BY s.ord`, runID)
	if err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", runID, err)
	}
	out := []*state.StepRecord{}
	found := false
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		found = true
		if data == nil {
			return nil
		}
		rec, err := decodeStep(data)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", runID, err)
	}
	return out, nil
}

func decodeStep(data []byte) (*state.StepRecord, error) {
	rec := new(state.StepRecord)
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("decode step: %w: %w", state.ErrCorrupt, err)
	}
	return rec, nil
}

// AppendEvents appends events to a run's log, or fails with
// state.ErrNotFound when the run does not exist.
func (s *Store) AppendEvents(ctx context.Context, runID string, events ...state.Event) error {
	evs, err := s.encodeEvents(events)
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	err = s.writeRun(ctx, runID, func(b *pgx.Batch) { queueSaveSteps(b, runID, evs, nil) })
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	return nil
}

// writeRun writes run runID with the statements queue queues: in a group
// when ctx fences the run itself (see commitWrites), else alone, in one
// round trip, after the fence's check. The step records kept from the
// run's claim are dropped first (see claimedSteps).
func (s *Store) writeRun(ctx context.Context, runID string, queue func(b *pgx.Batch)) error {
	s.claims.forgetSteps(runID)
	if f, ok := groupable(ctx, runID); ok {
		b := &pgx.Batch{}
		queue(b)
		if err := s.writeGrouped(ctx, runID, f.Owner, b); !errors.Is(err, errAlone) {
			return err
		}
	}
	b := newBatch(ctx, runID)
	queue(b)
	return s.fenceError(ctx, s.sendWrite(ctx, b))
}

// reserve takes run $1's next $2 event numbers (see queueSaveSteps).
const reserve = `UPDATE runbook_runs SET last_seq = last_seq + $2 WHERE id = $1`

// withEvents returns stmt, an INSERT or UPDATE of one run that reserves
// its last $nArg event numbers (last_seq), followed in the same statement
// by the insert of the events $evArg (json[]) under those numbers: one
// statement where a run's write and its events took two. It inserts no
// event, and reports no row, when stmt writes no run.
func withEvents(stmt string, nArg, evArg int) string {
	return runQuery(stmt) + `
` + insertEvents(nArg, evArg)
}

// runQuery is the WITH query r of a statement that writes one run (stmt,
// an INSERT or UPDATE that reserves event numbers) and goes on only when
// it wrote the run: r returns the run's id and last_seq.
func runQuery(stmt string) string {
	return `WITH r AS (` + stmt + `
	RETURNING id, last_seq
)`
}

// insertEvents inserts the events $evArg (json[]) of the run that query r
// returns under the last $nArg event numbers r reserved, none when r
// returns no run.
func insertEvents(nArg, evArg int) string {
	return `INSERT INTO runbook_events (run_id, seq, event)
SELECT r.id, r.last_seq - $` + strconv.Itoa(nArg) + ` + e.n, e.event
FROM r, unnest($` + strconv.Itoa(evArg) + `::json[]) WITH ORDINALITY AS e(event, n)`
}

// encodeEvents encodes events for withEvents: without their Seq (the
// row's seq column is the event's number), a zero Time set to now.
func (s *Store) encodeEvents(events []state.Event) ([][]byte, error) {
	out := make([][]byte, len(events))
	buf := make([]byte, 0, 160*len(events)) // the events' JSON, one after the other
	for i, ev := range events {
		ev.Seq = 0
		if ev.Time.IsZero() {
			ev.Time = s.now()
		}
		start := len(buf)
		var err error
		if buf, err = appendEvent(buf, &ev); err != nil {
			return nil, fmt.Errorf("encode event %s: %w", ev.Type, err)
		}
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out, nil
}

// Events returns a run's events with Seq > after, at most limit (0: all),
// or state.ErrNotFound when the run does not exist. One query: a run
// without such events is one row without an event, an unknown run no row.
func (s *Store) Events(ctx context.Context, runID string, after uint64, limit int) ([]state.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	var lim *int // NULL: no limit
	if limit > 0 {
		lim = &limit
	}
	from := int64(min(after, math.MaxInt64)) // seq is a bigint: nothing is past MaxInt64
	rows, err := s.pool.Query(ctx, `SELECT e.seq, e.event FROM runbook_runs r
LEFT JOIN LATERAL (
	SELECT seq, event FROM runbook_events WHERE run_id = r.id AND seq > $2 ORDER BY seq LIMIT $3
) e ON true
WHERE r.id = $1
ORDER BY e.seq`, runID, from, lim)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	out := []state.Event{}
	found := false
	var seq *int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
		found = true
		if seq == nil {
			return nil
		}
		var ev state.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("decode event %d: %w: %w", *seq, state.ErrCorrupt, err)
		}
		ev.Seq = uint64(*seq)
		out = append(out, ev)
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return out, nil
}
