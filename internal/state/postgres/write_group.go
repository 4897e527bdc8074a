package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/runbook/runbook/internal/state"
)

// Group commit of run writes.
//
// The writes an executing run makes (SaveRun, SaveRunSteps, SaveSteps,
// AppendEvents), fenced for the top-level run they write (state.Fence with
// Run the run itself), queue for a writer that commits the writes waiting
// at the same moment in one transaction, as the bbolt store's committer
// does: what PostgreSQL spends on a write is mostly per transaction and
// per round trip, and on a 2-CPU machine the database's CPU bounds the
// runs a second.
//
// A group is one transaction in two round trips. The first begins it and
// locks the rows of every member's run, in ID order, as the fence
// locks a top-level run (FOR NO KEY UPDATE), returning their owners. A
// member whose run is missing or owned by another than its fence's owner
// is left out of the group and written alone, through the write's own
// path (its fence then refuses it, with the owner named, or the run is
// not found): a fenced write never fails the others, and its caller gets
// the error it would get alone. The second round trip sends the other
// members' statements, the same statements a write sends alone minus the
// fence call (the group holds the lock the fence would take, and has
// checked the owner under it), and COMMIT. A member's statement that
// matches no run (a run recorded cancelled meanwhile) fails that member
// only, as it would fail it alone.
//
// When the group's transaction fails before its COMMIT (a deadlock, a
// statement refused), nothing of it was written and every member is
// written alone. When its COMMIT is not heard, every member gets the
// error: whether it committed is unknown, as for any transaction.
//
// A group of one member is written alone, in one round trip with its
// fence call instead of two, by the worker: the writes that arrive
// meanwhile wait and go in the next group, as they would behind a group.
// Written by its caller instead, it would leave the worker free to take
// the next write alone too, and a steady stream of writes would go alone,
// a transaction each.

// writeWorkers bounds the write groups of one Store in flight at once.
// With one, the writes that arrive while a group commits wait for the
// next group instead of going alone to a second worker: fewer writes
// alone (each a transaction with its own fence call), less of
// PostgreSQL's CPU a run (docs/performance.md).
const writeWorkers = 1

// maxWriteGroup bounds the writes of one group transaction.
const maxWriteGroup = 128

// errAlone answers a member the group did not write: its caller writes it
// alone.
var errAlone = errors.New("written alone")

// runWrite is a fenced write of one top-level run waiting for a group.
type runWrite struct {
	run   string
	owner string     // the fence's owner
	b     *pgx.Batch // the write's statements, without the fence
	err   error
}

// newWriteQueue returns s's queue of run writes: up to writeWorkers
// groups in flight, each of any writes; a caller waits for the outcome of
// a write taken.
func newWriteQueue(s *Store) *groupQueue[*runWrite] {
	return &groupQueue[*runWrite]{workers: writeWorkers, max: maxWriteGroup, send: s.commitWrites, waitTaken: true}
}

// RunWriteGroups returns how many group transactions the store has
// committed for run writes and how many writes they held (their ratio is
// the mean group size, for benchmarks).
func (s *Store) RunWriteGroups() (groups, writes int64) {
	return s.writes.Groups()
}

// groupable returns the fence of a write of run runID that may go in a
// group: one ctx fences for runID itself.
func groupable(ctx context.Context, runID string) (state.Fence, bool) {
	f, ok := state.FenceOf(ctx)
	return f, ok && f.Run == runID && f.Owner != ""
}

// writeGrouped queues the statements b (without a fence) of a write of
// run runID fenced for owner, and waits for the outcome: nil once
// committed, errAlone when the caller is to write it alone (with its
// fence), or the write's error (a refusal of the fence, of a write the
// worker sent alone, as a *state.FencedError). A ctx that ends before a
// worker takes the write returns ctx's error (the write never runs);
// once taken, the outcome is awaited.
func (s *Store) writeGrouped(ctx context.Context, runID, owner string, b *pgx.Batch) error {
	w := &runWrite{run: runID, owner: owner, b: b}
	if err := s.writes.do(ctx, w); err != nil {
		return err
	}
	return s.fenceError(ctx, w.err)
}

// lockRuns locks the runs $1 as the fence locks a top-level run, in
// ID order (two groups lock their common runs in one order), and returns
// their owners.
const lockRuns = `SELECT id, owner FROM runbook_runs WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE`

// commitWrites writes group in one transaction (see the top of this
// file), setting each member's outcome, and reports whether the group's
// transaction committed. A group of one is written alone, here.
func (s *Store) commitWrites(ctx context.Context, group []*runWrite) bool {
	if len(group) == 1 {
		w := group[0]
		b := &pgx.Batch{}
		queueFenceOf(b, w.run, state.Fence{Run: w.run, Owner: w.owner}) // the run is its own fence's
		b.QueuedQueries = append(b.QueuedQueries, w.b.QueuedQueries...)
		w.err = s.sendWrite(ctx, b)
		return false
	}
	in, err := s.sendWrites(ctx, group)
	switch {
	case err == nil:
		return true
	case errors.Is(err, errCommitUnheard):
		for _, w := range in {
			w.err = classify(err) // as a write alone whose commit was not heard
		}
	default:
		for _, w := range group {
			w.err = errAlone // nothing was written
		}
	}
	return false
}

// errCommitUnheard wraps the error of a group transaction that may have
// committed: its COMMIT was sent and no answer was read.
var errCommitUnheard = errors.New("commit of a group of run writes not answered")

// sendWrites runs the group's transaction and returns the members it
// held. Members left out get errAlone, members whose statements matched
// no run their error; the returned error is the group's: errCommitUnheard,
// or any other when nothing was written.
func (s *Store) sendWrites(ctx context.Context, group []*runWrite) ([]*runWrite, error) {
	conn, err := s.pool.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release() // a connection left in a transaction is closed
	ids := make([]string, 0, len(group))
	for _, w := range group {
		ids = append(ids, w.run)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	owners := map[string]string{}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(lockRuns, ids).Query(func(rows pgx.Rows) error {
		var id, owner string
		_, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error {
			owners[id] = owner
			return nil
		})
		return err
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(conn.Conn())
		return nil, err
	}
	b = &pgx.Batch{}
	var in []*runWrite
	for _, w := range group {
		if owner, ok := owners[w.run]; !ok || owner != w.owner {
			w.err = errAlone // refused or not found: its own path says which
			continue
		}
		in = append(in, w)
		b.QueuedQueries = append(b.QueuedQueries, w.b.QueuedQueries...)
	}
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	var pe *pgconn.PgError
	for _, w := range in {
		for _, q := range w.b.QueuedQueries {
			var err error
			if q.Fn != nil {
				err = q.Fn(br)
			} else {
				_, err = br.Exec()
			}
			switch {
			case err == nil:
			case errors.Is(err, state.ErrNotFound):
				if w.err == nil {
					w.err = err // its run matched no row: this member only
				}
			case errors.As(err, &pe):
				_ = br.Close() // refused: the transaction is aborted, COMMIT skipped
				rollback(conn.Conn())
				return in, err
			default:
				return in, fmt.Errorf("%w: %w", errCommitUnheard, err)
			}
		}
	}
	_, err = br.Exec() // the COMMIT
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		return in, nil
	case errors.As(err, &pe) && !transient(err):
		rollback(conn.Conn()) // refused: rolled back
		return in, err
	}
	// Cut (a terminated backend, a restart) while or after it committed.
	return in, fmt.Errorf("%w: %w", errCommitUnheard, err)
}

// rollbackTimeout bounds the ROLLBACK of a failed group.
const rollbackTimeout = 5 * time.Second

// rollback ends the transaction a failed group left open on conn; the
// pool closes a connection that is still in one when it is released.
func rollback(conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' || conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, `ROLLBACK`)
}
