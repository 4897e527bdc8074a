package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

// runColumns are the columns a run's record sets, in the order of
// runArgs ($1 to $15). last_seq is not among them: it is the store's.
const runColumns = `id, playbook, status, parent_id, trigger_type, trigger_key, concurrency_key, owner,
	created_ns, created_at, started_at, ended_at, hash, snapshot, record`

// snapshotValue is what a run's snapshot column holds, given its hash $13
// and source $14: nothing when runbook_snapshots holds that source under
// that hash (stored by the statement before), else the source itself (no
// hash, or a hash first stored with another source: the hash is not
// trusted over the source).
const snapshotValue = `CASE WHEN $13 <> '' AND EXISTS (SELECT FROM runbook_snapshots WHERE hash = $13 AND source = $14)
	THEN NULL ELSE $14 END`

// insertRun inserts a run whose first $16 events follow (see withEvents).
// A taken ID fails on the primary key, and with it the transaction (see
// createRunError).
const insertRun = `INSERT INTO runbook_runs (` + runColumns + `, last_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, ` + snapshotValue + `, $15, $16)`

// updateRun replaces a run's columns and reserves $16 event numbers. It
// never records another status over a cancellation the write did not see
// (notOverCancelled).
const updateRun = `UPDATE runbook_runs SET (` + runColumns + `) =
	($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, ` + snapshotValue + `, $15),
	last_seq = last_seq + $16
WHERE id = $1 AND ` + notOverCancelled + ` AND ` + notCancelOverEnded

// notOverCancelled is the condition that a write of status $3 with end
// time $12 may replace the stored run: it is not cancelled, or the write
// says cancelled too, or the writer saw the cancellation (its record
// carries the cancellation's end time: a cancelled run resumed on
// purpose). A run executing here and recorded cancelled by another
// process meanwhile is refused (state.ErrCancelledMeanwhile, see
// cancelledMeanwhile).
const notOverCancelled = `(status <> 'cancelled' OR $3 = 'cancelled' OR ended_at IS NOT DISTINCT FROM $12)`

// notCancelOverEnded is the condition that a write of status $3 with end
// time $12 does not record a cancellation over a run that ended
// otherwise since the writer read it (a cancel racing the run's end on
// another process): refused, state.ErrEndedMeanwhile.
const notCancelOverEnded = `($3 <> 'cancelled' OR status NOT IN ('succeeded', 'failed', 'skipped') OR ended_at IS NOT DISTINCT FROM $12)`

// cancelledMeanwhile turns the ErrNotFound of a run write that changed
// no row into state.ErrCancelledMeanwhile when the run exists, recorded
// cancelled (notOverCancelled refused it), or into
// state.ErrEndedMeanwhile when it ended otherwise (notCancelOverEnded).
func (s *Store) cancelledMeanwhile(ctx context.Context, id string, err error) error {
	if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	var status string
	if s.pool.QueryRow(ctx, `SELECT status FROM runbook_runs WHERE id = $1`, id).Scan(&status) != nil {
		return err
	}
	switch st := state.RunStatus(status); {
	case st == state.RunCancelled:
		return fmt.Errorf("run %s: %w", id, state.ErrCancelledMeanwhile)
	case st.Done():
		return &state.EndedMeanwhileError{Run: id, Status: st}
	}
	return err
}

// storeSnapshot keeps source $2 under hash $1 unless the hash is taken.
// Run with a new run, it is undone if the run's insert fails.
const storeSnapshot = `INSERT INTO runbook_snapshots (hash, source) VALUES ($1, $2)
ON CONFLICT (hash) DO NOTHING`

// storeSnapshotOf is storeSnapshot for an existing run $3: with no such
// run it stores nothing.
const storeSnapshotOf = `INSERT INTO runbook_snapshots (hash, source)
SELECT $1, $2 WHERE EXISTS (SELECT FROM runbook_runs WHERE id = $3)
ON CONFLICT (hash) DO NOTHING`

// selectRun reads runs with their snapshots: the run's own, else the one
// stored under its hash.
const selectRun = `SELECT r.id, r.record, COALESCE(r.snapshot, s.source)
FROM runbook_runs r
LEFT JOIN runbook_snapshots s ON r.snapshot IS NULL AND r.hash <> '' AND s.hash = r.hash`

// runArgs returns the values of runColumns for r, whose record is record
// (JSON, without the snapshot); $14 is the source, which snapshotValue
// keeps in the row or not.
func runArgs(r *state.Run, record []byte) []any {
	triggerType, triggerKey := runTrigger(r)
	return []any{
		r.ID, r.Playbook, string(r.Status), r.ParentID, triggerType, triggerKey, r.ConcurrencyKey, r.Owner,
		r.CreatedAt.UnixNano(), r.CreatedAt, nullTime(r.StartedAt), nullTime(r.EndedAt), r.Hash, runSource(r), record,
	}
}

// runTrigger is r's trigger_type and trigger_key columns.
func runTrigger(r *state.Run) (typ, key string) {
	typ, _ = r.Trigger["type"].(string)
	key, _ = r.Trigger["key"].(string)
	return typ, key
}

// runSource is r's snapshot as the source its row is given (see
// snapshotValue): nil, NULL, when it has none.
func runSource(r *state.Run) []byte {
	if len(r.Snapshot) > 0 {
		return r.Snapshot
	}
	return nil
}

// encodeRun returns r's record: its JSON without the snapshot, which is
// stored apart (see snapshotValue).
func encodeRun(r *state.Run) ([]byte, error) {
	rec := *r
	rec.Snapshot = nil
	data, err := appendRun(make([]byte, 0, 512), &rec)
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	return data, nil
}

// CreateRun stores a new run and its first events (numbered from 1), in
// one round trip. It fails with state.ErrExists when the ID is taken,
// writing nothing. A zero CreatedAt is set to now, in r too.
func (s *Store) CreateRun(ctx context.Context, r *state.Run, events ...state.Event) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	record, err := encodeRun(r)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	evs, err := s.encodeEvents(events)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	b := newBatch(ctx, r.ID) // a sub-playbook run is created by its root's owner
	queueCreateRun(b, r, record, evs)
	send := s.send
	if r.Delivery != nil {
		send = func(ctx context.Context, b *pgx.Batch) error { return s.createRunOfDelivery(ctx, r, b) }
	}
	if err := createRunError(r.ID, s.fenceError(ctx, send(ctx, b))); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	s.snapshots.sawRun(r)
	if r.Owner != "" && r.ParentID == "" && r.RetryOf == "" {
		// Committed as its owner's (engine.StartRequest.Own): it has no
		// step records but the ones its owner writes through this store
		// (fenced: no other replica writes them), as a run a delivery
		// commits claimed (keepCommittedClaims). Its status is not kept:
		// another replica may cancel it meanwhile, and ClaimedStatus
		// answers only for what a claim read.
		s.claims.keep(r.ID, keptSteps{})
	}
	return nil
}

// queueCreateRun queues the statements that insert a run, encoded, with
// its first events, for a batch of their own or within a transaction.
func queueCreateRun(b *pgx.Batch, r *state.Run, record []byte, evs [][]byte) {
	if hasSnapshot(r) {
		b.Queue(storeSnapshot, r.Hash, r.Snapshot)
	}
	if len(evs) == 0 {
		b.Queue(insertRun, append(runArgs(r, record), 0)...)
		return
	}
	b.Queue(withEvents(insertRun, 16, 17), append(runArgs(r, record), len(evs), evs)...)
}

// createRunError turns the failed insert of a taken run ID into
// state.ErrExists.
func createRunError(id string, err error) error {
	if isUniqueViolation(err, "runbook_runs_pkey") {
		return fmt.Errorf("run %s: %w", id, state.ErrExists)
	}
	return err
}

// SaveRun replaces a run's record and appends events, in one round trip.
// It fails with state.ErrNotFound for a run never created, writing
// nothing. A zero CreatedAt keeps the stored one (read first, in the same
// transaction).
func (s *Store) SaveRun(ctx context.Context, r *state.Run, events ...state.Event) error {
	return s.SaveRunSteps(ctx, r, nil, events...)
}

// SaveRunSteps writes step records of r and r itself and appends events,
// in one transaction (one round trip unless CreatedAt is zero), as
// SaveSteps and SaveRun do. A write ctx fences (state.WithFence) that the
// fence refuses fails with a *state.FencedError, writing nothing.
func (s *Store) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, events ...state.Event) error {
	for _, rec := range recs {
		if rec.RunID != r.ID {
			return fmt.Errorf("save run %s: a record of run %s", r.ID, rec.RunID)
		}
	}
	rows, err := encodeSteps(recs, s.now())
	if err != nil {
		return err
	}
	evs, err := s.encodeEvents(events)
	if err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, err)
	}
	batch := func(r *state.Run) (*pgx.Batch, error) {
		return s.queueSaveRun(newBatch(ctx, r.ID), r, evs, rows)
	}
	s.claims.forgetSteps(r.ID)
	if f, ok := groupable(ctx, r.ID); ok && !r.CreatedAt.IsZero() {
		b := &pgx.Batch{}
		if _, err := s.queueSaveRun(b, r, evs, rows); err != nil {
			return err
		}
		if err := s.writeGrouped(ctx, r.ID, f.Owner, b); !errors.Is(err, errAlone) {
			if err != nil {
				return fmt.Errorf("save run %s: %w", r.ID, s.cancelledMeanwhile(ctx, r.ID, err))
			}
			s.snapshots.sawRun(r)
			return nil
		}
	}
	if r.CreatedAt.IsZero() {
		err = s.write(ctx, func(tx pgx.Tx) error {
			created, err := storedCreatedAt(ctx, tx, r.ID)
			if err != nil {
				return err
			}
			cp := *r
			cp.CreatedAt = created
			b, err := batch(&cp)
			if err != nil {
				return err
			}
			return tx.SendBatch(ctx, b).Close()
		})
	} else {
		var b *pgx.Batch
		if b, err = batch(r); err == nil {
			err = s.sendWrite(ctx, b)
		}
	}
	if err != nil {
		return fmt.Errorf("save run %s: %w", r.ID, s.cancelledMeanwhile(ctx, r.ID, s.fenceError(ctx, err)))
	}
	s.snapshots.sawRun(r)
	return nil
}

// queueSaveRun queues into b the statement that replaces a run, appends
// its events, upserts its step records (rows; nil: none) with the lines
// they printed and, for a run that ends, frees its concurrency key (see
// saveRunStatement), and returns b. When the run does not exist or
// refuses the write, it reports ErrNotFound and writes nothing, nor does
// the snapshot's statement. A snapshot seen committed (storedSnapshots)
// is not stored again.
func (s *Store) queueSaveRun(b *pgx.Batch, r *state.Run, evs [][]byte, rows *stepRows) (*pgx.Batch, error) {
	record, err := encodeRun(r)
	if err != nil {
		return nil, err
	}
	if hasSnapshot(r) && !s.snapshots.has(r.Hash) {
		b.Queue(storeSnapshotOf, r.Hash, r.Snapshot, r.ID)
	}
	args := append(runArgs(r, record), len(evs))
	if len(evs) > 0 {
		args = append(args, evs)
	}
	args, steps, output := rows.appendArgs(args, r.ID)
	freeKey := r.ConcurrencyKey != "" && r.Status.KeyFreed()
	b.Queue(saveRunStatement(len(evs) > 0, steps, output, freeKey), args...).QueryRow(func(row pgx.Row) error {
		return runFound(row, r.ID)
	})
	return b, nil
}

// saveRunStatements are the statements saveRunStatement returns, by
// what they write besides the run (variant).
var saveRunStatements = sync.OnceValue(func() (stmts [16]string) {
	for v := range stmts {
		stmts[v] = buildSaveRun(v&1 != 0, v&2 != 0, v&4 != 0, v&8 != 0)
	}
	return stmts
})

// saveRunStatement returns the one statement a run's write is: updateRun
// (the run's columns $1 to $15, $16 event numbers reserved), then, each
// only when the update matched the run, the events $17 (events) as
// withEvents appends them, the step records of the next three arguments
// (steps) as stepsCTE writes them, the lines they printed in the next
// five (output) as outputCTE appends them, and the release of the key
// $7 the run holds (freeKey: a write of a status that frees it,
// EndFreesKey). A write refused (the run recorded cancelled meanwhile,
// whose owner releases the key once it has stopped) thus writes nothing;
// a waiter on a key freed is told at commit, as by ReleaseLock (the
// table's trigger). It answers how many runs it updated: 0 when the run
// does not exist or the update was refused. One statement instead of up
// to four: PostgreSQL's cost of a write is mostly per statement (its
// executor's start, its relations opened), not per row
// (docs/performance.md).
func saveRunStatement(events, steps, output, freeKey bool) string {
	return saveRunStatements()[variant(events, steps, output, freeKey)]
}

// variant numbers a statement's variant by the parts it has: bit i is
// parts[i].
func variant(parts ...bool) int {
	v := 0
	for i, p := range parts {
		if p {
			v |= 1 << i
		}
	}
	return v
}

func buildSaveRun(events, steps, output, freeKey bool) string {
	q := runQuery(updateRun)
	next := 17
	if events {
		q += eventsCTE(16, 17)
		next++
	}
	q += recordsCTEs(steps, output, next)
	if freeKey {
		q += `, k AS (
	DELETE FROM runbook_locks WHERE key = $7 AND owner = $1 AND EXISTS (SELECT FROM r)
)`
	}
	return q + `
SELECT count(*) FROM r`
}

// EndFreesKey reports that a run's write in a status that frees its key
// frees it (state.EndFreesKey).
func (s *Store) EndFreesKey() bool { return true }

// storedCreatedAt returns the creation time of a stored run as its record
// has it (the column has microseconds only).
func storedCreatedAt(ctx context.Context, tx pgx.Tx, id string) (time.Time, error) {
	var data []byte
	err := tx.QueryRow(ctx, `SELECT record FROM runbook_runs WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("run %s: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return time.Time{}, err
	}
	old, err := decodeRun(id, data, nil)
	if err != nil {
		return time.Time{}, err
	}
	return old.CreatedAt, nil
}

func decodeRun(id string, record, snapshot []byte) (*state.Run, error) {
	r := new(state.Run)
	if err := json.Unmarshal(record, r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w: %w", id, state.ErrCorrupt, err)
	}
	if len(snapshot) > 0 {
		r.Snapshot = snapshot
	}
	return r, nil
}

// GetRun returns a run or state.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (*state.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	var record, snapshot []byte
	err := s.pool.QueryRow(ctx, selectRun+` WHERE r.id = $1`, id).Scan(&id, &record, &snapshot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get run: run %s: %w", id, state.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	r, err := decodeRun(id, record, snapshot)
	if err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// RunStatuses reads the statuses of the runs ids alone
// (state.StatusReader): one statement, the primary key's index.
func (s *Store) RunStatuses(ctx context.Context, ids []string) (map[string]state.RunStatus, error) {
	out := make(map[string]state.RunStatus, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, status FROM runbook_runs WHERE id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("run statuses: %w", err)
	}
	var id string
	var st state.RunStatus
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error {
		out[id] = st
		return nil
	}); err != nil {
		return nil, fmt.Errorf("run statuses: %w", err)
	}
	return out, nil
}

// ListRuns returns the runs matching f, newest first (by CreatedAt, then
// ID descending). With f.Before (keyset paging) the listing starts after
// that position: each page is one index range scan however deep it is,
// and a run created meanwhile neither shifts the pages nor repeats a run.
func (s *Store) ListRuns(ctx context.Context, f state.RunFilter) ([]*state.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	sql, args := listQuery(f)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := []*state.Run{}
	var id string
	var record, snapshot []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &record, &snapshot}, func() error {
		r, err := decodeRun(id, record, snapshot)
		if err != nil {
			return err
		}
		r.Trigger = state.BriefTrigger(r.Trigger) // see state.Store.ListRuns
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// listQuery builds the listing's query with only the conditions f sets,
// so that the planner sees plain conditions that match an index: a page
// without a filter, or filtered by one status, a playbook (and a
// status), a parent or a trigger key, is read from an index in listing
// order, starting at the cursor. (Several statuses are read from the
// status index and sorted. Succeeded runs, which the status index leaves
// out, are read from the newest, skipping the runs of other statuses:
// most runs end succeeded.) The partial indexes' condition is repeated
// as a constant, so that a generic plan (a prepared statement run often)
// can use them too.
func listQuery(f state.RunFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.Status) > 0 && !slices.Contains(f.Status, state.RunSucceeded) {
		where = append(where, "r.status <> 'succeeded'") // runbook_runs_status's predicate
	}
	switch len(f.Status) {
	case 0:
	case 1: // equality: the status index then yields the listing order
		where = append(where, "r.status = "+arg(string(f.Status[0])))
	default: // the matches of several statuses are sorted
		statuses := make([]string, len(f.Status))
		for i, st := range f.Status {
			statuses[i] = string(st)
		}
		where = append(where, "r.status = ANY("+arg(statuses)+"::text[])")
	}
	if f.Playbook != "" {
		where = append(where, "r.playbook = "+arg(f.Playbook))
	}
	if f.ParentID != "" {
		where = append(where, "r.parent_id = "+arg(f.ParentID), "r.parent_id <> ''")
	}
	if f.TriggerKey != "" {
		where = append(where, "r.trigger_key = "+arg(f.TriggerKey), "r.trigger_key <> ''")
	}
	if c := f.Before; c != nil {
		where = append(where, "(r.created_ns, r.id) < ("+arg(c.CreatedAt.UnixNano())+", "+arg(c.ID)+")")
	}
	sql := selectRun
	if len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, " AND ")
	}
	sql += "\nORDER BY r.created_ns DESC, r.id DESC"
	if f.Limit > 0 {
		sql += "\nLIMIT " + arg(f.Limit)
	}
	return sql, args
}
