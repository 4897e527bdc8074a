package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

// PutIntent records (or replaces) the intent of a run's step. It fails with
// state.ErrNotFound when the run does not exist, and with a
// *state.FencedError, writing nothing, when ctx's fence refuses it: the
// intent precedes a mutating call, so a replica that lost the run makes
// no new one.
func (s *Store) PutIntent(ctx context.Context, in state.Intent) error {
	if err := s.putRunRecord(ctx, "runbook_intents", in.RunID, in.Step, in, true); err != nil {
		return fmt.Errorf("put intent %s/%s: %w", in.RunID, in.Step, err)
	}
	return nil
}

// GetIntent returns the intent of a run's step or state.ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, runID, step string) (*state.Intent, error) {
	in := new(state.Intent)
	if err := s.getRunRecord(ctx, "runbook_intents", runID, step, in); err != nil {
		return nil, fmt.Errorf("get intent %s/%s: %w", runID, step, err)
	}
	return in, nil
}

// AnswerApproval answers a run's approval step as a compare-and-set (see
// state.Store). Its transaction first locks the run's row
// (lockApproval), so the answers to the run's approvals, on any
// connection of any replica, go one after the other: the read that
// follows, a statement of its own, sees every answer committed before the
// lock was granted (under READ COMMITTED each statement reads what is
// committed when it starts). Then decide, then the approval and its
// events are written and committed together; the approval's trigger
// (runbook_notify_approval) sends its notice when the transaction
// commits. A transaction that PostgreSQL aborted (deadlock, serialization
// failure under a stricter isolation level) is run again, decide with it;
// one that keeps failing so is answered as a fault.Conflict. decide's
// error is returned as it is.
func (s *Store) AnswerApproval(ctx context.Context, runID, step string, decide state.Decide) error {
	var refused error
	err := s.write(ctx, func(tx pgx.Tx) error {
		refused = nil // the function may run again (see write)
		rec, prev, err := lockApproval(ctx, tx, runID, step)
		if err != nil {
			return err
		}
		next, events, err := decide(rec, prev)
		if err != nil {
			refused = err
			return err
		}
		if next == nil {
			return nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		evs, err := s.encodeEvents(events)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO runbook_approvals (run_id, step, record) VALUES ($1, $2, $3)
ON CONFLICT (run_id, step) DO UPDATE SET record = EXCLUDED.record`, runID, step, data)
		if len(evs) > 0 {
			b.Queue(withEvents(reserve, 2, 3), runID, len(evs), evs)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	switch {
	case refused != nil:
		return refused
	case retryable(err):
		return &fault.Error{Code: fault.Conflict, Err: err, Message: fmt.Sprintf(
			"answer to step %s of run %s not recorded: it kept colliding with other writes of the run; answer again", step, runID)}
	case err != nil:
		return fmt.Errorf("answer approval %s/%s: %w", runID, step, s.fenceError(ctx, err))
	}
	return nil
}

// lockApproval locks run runID's row in tx (after ctx's fence, if any)
// and reads, after the lock, step's record and its approval (each nil
// when there is none): one round trip.
func lockApproval(ctx context.Context, tx pgx.Tx, runID, step string) (*state.StepRecord, *state.Approval, error) {
	var stepData, data []byte
	b := &pgx.Batch{}
	queueFence(ctx, b, runID)
	b.Queue(`SELECT FROM runbook_runs WHERE id = $1 FOR NO KEY UPDATE`, runID).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
		}
		return nil
	})
	b.Queue(`SELECT (SELECT record FROM runbook_steps WHERE run_id = $1 AND step_id = $2),
	(SELECT record FROM runbook_approvals WHERE run_id = $1 AND step = $2)`, runID, step).QueryRow(func(row pgx.Row) error {
		return row.Scan(&stepData, &data)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	var rec *state.StepRecord
	if stepData != nil {
		var err error
		if rec, err = decodeStep(stepData); err != nil {
			return nil, nil, err
		}
	}
	if data == nil {
		return rec, nil, nil
	}
	prev := new(state.Approval)
	if err := json.Unmarshal(data, prev); err != nil {
		return nil, nil, fmt.Errorf("decode approval: %w: %w", state.ErrCorrupt, err)
	}
	return rec, prev, nil
}

// GetApproval returns the answer to a run's approval step or
// state.ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, runID, step string) (*state.Approval, error) {
	a := new(state.Approval)
	if err := s.getRunRecord(ctx, "runbook_approvals", runID, step, a); err != nil {
		return nil, fmt.Errorf("get approval %s/%s: %w", runID, step, err)
	}
	return a, nil
}

// putRunRecord upserts v as the record of (runID, step) in table, one of
// the per-step tables whose run_id references the run: a run that does
// not exist fails the foreign key, reported as state.ErrNotFound. With
// fenced, ctx's fence (if any) is checked first, in the same transaction.
func (s *Store) putRunRecord(ctx context.Context, table, runID, step string, v any, fenced bool) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	const upsert = `INSERT INTO %s (run_id, step, record) VALUES ($1, $2, $3)
ON CONFLICT (run_id, step) DO UPDATE SET record = EXCLUDED.record`
	if _, ok := state.FenceOf(ctx); fenced && ok {
		b := newBatch(ctx, runID)
		b.Queue(fmt.Sprintf(upsert, table), runID, step, data)
		err = s.fenceError(ctx, s.send(ctx, b))
	} else {
		_, err = s.pool.Exec(ctx, fmt.Sprintf(upsert, table), runID, step, data)
	}
	if isForeignKeyViolation(err) {
		return fmt.Errorf("run %s: %w", runID, state.ErrNotFound)
	}
	return err
}

func (s *Store) getRunRecord(ctx context.Context, table, runID, step string, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM `+table+` WHERE run_id = $1 AND step = $2`, runID, step).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode: %w: %w", state.ErrCorrupt, err)
	}
	return nil
}

// insertLock takes key $1 for $2 when it is free.
const insertLock = `INSERT INTO runbook_locks (key, owner, process, since, record)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING`

// AcquireLock takes l.Key for l.Owner when it is free, or reports true
// without change when l.Owner already holds it (at once when the run's
// delivery commit took it a moment ago: committedKeys). Otherwise it
// returns false and the holder, and marks the key waited for: its
// release is then a notice to every replica (runbook_notify_key). A zero
// l.Since is set to now. The key's primary key makes the claim: of two replicas inserting
// it at once, one waits for the other's commit and finds the key taken.
func (s *Store) AcquireLock(ctx context.Context, l state.Lock) (ok bool, holder *state.Lock, err error) {
	if s.committedKeys.take(l.Owner, l.Key) { // taken with the run's commit
		return true, nil, nil
	}
	if l.Since.IsZero() {
		l.Since = s.now()
	}
	data, err := json.Marshal(l)
	if err != nil {
		return false, nil, fmt.Errorf("acquire lock %s: encode: %w", l.Key, err)
	}
	// A free key (the common case) is taken by one statement, with the
	// free keys asked for at the same moment (lockGroup); a taken one is
	// looked at in a transaction below.
	req := &lockReq{key: l.Key, owner: l.Owner, process: l.Process, since: l.Since, record: data}
	if err := s.locks.do(ctx, req); err != nil {
		return false, nil, fmt.Errorf("acquire lock %s: %w", l.Key, err)
	}
	if req.err != nil {
		return false, nil, req.err
	}
	if req.took {
		return true, nil, nil
	}
	err = s.write(ctx, func(tx pgx.Tx) error {
		ok, holder = false, nil // the function may run again (see write)
		// A holder that releases between the insert and the read leaves
		// the key free: insert again (a few times at most).
		for range maxAttempts {
			tag, err := tx.Exec(ctx, insertLock, l.Key, l.Owner, l.Process, l.Since, data)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				ok = true
				return nil
			}
			var cur []byte
			err = tx.QueryRow(ctx, `UPDATE runbook_locks SET waited = true WHERE key = $1 RETURNING record`, l.Key).Scan(&cur)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			h := new(state.Lock)
			if err := json.Unmarshal(cur, h); err != nil {
				return fmt.Errorf("decode lock: %w: %w", state.ErrCorrupt, err)
			}
			if h.Owner == l.Owner {
				ok = true
				return nil
			}
			var status state.RunStatus
			err = tx.QueryRow(ctx, `SELECT status FROM runbook_runs WHERE id = $1`, h.Owner).Scan(&status)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if !status.KeyFreed() {
				holder = h
				return nil
			}
			// Held by a run that ended (state.RunStatus.KeyFreed): free it
			// and insert again.
			if _, err := tx.Exec(ctx, `DELETE FROM runbook_locks WHERE key = $1 AND owner = $2`, l.Key, h.Owner); err != nil {
				return err
			}
		}
		return errors.New("the key kept changing hands")
	})
	if err != nil {
		return false, nil, fmt.Errorf("acquire lock %s: %w", l.Key, err)
	}
	return ok, holder, nil
}

// ReleaseLock frees key when owner holds it. A free key is not an error;
// a key held by someone else is left held and reported as an error.
func (s *Store) ReleaseLock(ctx context.Context, key, owner string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("release lock %s: %w", key, err)
	}
	// One statement: the delete, and the holder when it is not owner.
	var other string
	err := s.pool.QueryRow(ctx, `WITH released AS (
	DELETE FROM runbook_locks WHERE key = $1 AND owner = $2
)
SELECT owner FROM runbook_locks WHERE key = $1 AND owner <> $2`, key, owner).Scan(&other)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("release lock %s: %w", key, err)
	}
	return fmt.Errorf("release lock %s: %w: held by %s, not %s", key, state.ErrHeldByAnother, other, owner)
}

// Locks returns the held locks ordered by key.
func (s *Store) Locks(ctx context.Context) ([]state.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	// Read once as a process starts (and by runbook keys): the simple
	// protocol's one round trip, not a new statement's two.
	rows, err := s.pool.Query(ctx, `SELECT record FROM runbook_locks ORDER BY key`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	var out []state.Lock
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		var l state.Lock
		if err := json.Unmarshal(data, &l); err != nil {
			return fmt.Errorf("decode lock: %w: %w", state.ErrCorrupt, err)
		}
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return out, nil
}

// GetCursor returns the value stored under key or state.ErrNotFound.
func (s *Store) GetCursor(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get cursor %s: %w", key, err)
	}
	var val []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM runbook_cursors WHERE key = $1`, key).Scan(&val)
	if errors.Is(err, pgx.ErrNoRows) {
		err = state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get cursor %s: %w", key, err)
	}
	return orEmpty(val), nil
}

// PutCursor stores val under key, replacing any previous value.
func (s *Store) PutCursor(ctx context.Context, key string, val []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put cursor %s: %w", key, err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO runbook_cursors (key, value) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, orEmpty(val))
	if err != nil {
		return fmt.Errorf("put cursor %s: %w", key, err)
	}
	return nil
}
