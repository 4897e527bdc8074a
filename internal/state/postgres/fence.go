package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

// Fencing (state.Fence). A write that ctx fences starts with the fence's
// statement, which locks the fence's top-level run and fails the
// transaction when its owner is no longer the fence's: the statements
// after it are not run, so a refused write writes nothing.
//
// The statement is plain SQL. SQL has no statement that raises an error
// of one's own, so the fence fails by casting a sentence to an integer:
// SQLSTATE 22P02 (invalid_text_representation), the sentence ("run … is
// owned by … now, not by …") in the server's log. The store knows a
// refusal by the statement it came from (the fence's result), not by its
// text, and reads the owner afterwards. The schema's PL/pgSQL function
// runbook_fence does the same with an error of its own (RB001) and is
// kept for older builds; this build does not call it: a new backend
// loads PL/pgSQL and compiles the function at its first call, some
// milliseconds (docs/performance.md), and the one backend of a
// `runbook run` process is always new.

// fenceOwn checks that top-level run $1 is owned by $2, locking it as a
// write of the run itself does (FOR NO KEY UPDATE: a claim, an update of
// the owner, waits for the write to end).
const fenceOwn = fenceCheck + `NO KEY UPDATE) f`

// fenceShared is fenceOwn for a write of one of the top-level run's
// sub-playbook runs, which shares the lock (FOR SHARE): the run's
// sub-playbook runs write at once, and a claim still waits for them.
const fenceShared = fenceCheck + `SHARE) f`

// fenceCheck is the fence's statement but for the strength of its lock.
const fenceCheck = `SELECT CASE WHEN f.owner IS DISTINCT FROM $2::text
	THEN ('run ' || f.id || ' is owned by ' || f.owner || ' now, not by ' || $2::text)::int END
FROM (SELECT id, owner FROM runbook_runs WHERE id = $1 FOR `

// refusedCode is the SQLSTATE of a fence's refusal (see above).
const refusedCode = "22P02"

// fenceRefusal is the error of a fence's statement that refused a write.
type fenceRefusal struct{ err error }

func (r *fenceRefusal) Error() string { return r.err.Error() }
func (r *fenceRefusal) Unwrap() error { return r.err }

// newBatch returns a batch for a write of run runID, starting with the
// check of ctx's fence when it has one.
func newBatch(ctx context.Context, runID string) *pgx.Batch {
	b := &pgx.Batch{}
	queueFence(ctx, b, runID)
	return b
}

// queueFence queues the check of ctx's fence (none: nothing) for a write
// of run runID.
func queueFence(ctx context.Context, b *pgx.Batch, runID string) {
	if f, ok := state.FenceOf(ctx); ok {
		queueFenceOf(b, runID, f)
	}
}

// queueFenceOf queues the check of fence f for a write of run runID: its
// statement's refusal is returned as a *fenceRefusal.
func queueFenceOf(b *pgx.Batch, runID string, f state.Fence) {
	stmt := fenceShared
	if runID == f.Run {
		stmt = fenceOwn
	}
	b.Queue(stmt, f.Run, f.Owner).Fn = func(br pgx.BatchResults) error {
		_, err := br.Exec()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == refusedCode {
			return &fenceRefusal{err: err}
		}
		return err
	}
}

// fenceError turns a write refused by ctx's fence into a
// *state.FencedError naming the run's owner now (read after the refusal;
// empty when it cannot be read); other errors are returned as they are.
func (s *Store) fenceError(ctx context.Context, err error) error {
	var refused *fenceRefusal
	if !errors.As(err, &refused) {
		return err
	}
	f, _ := state.FenceOf(ctx)
	var owner string
	_ = s.pool.QueryRow(ctx, `SELECT owner FROM runbook_runs WHERE id = $1`, f.Run).Scan(&owner)
	return &state.FencedError{Run: f.Run, Owner: owner}
}
