package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/state"
)

var _ state.Coordinator = (*Store)(nil)

// KeepReplica implements state.Coordinator: replica's row lives until ttl
// from now, by the database's clock; its kind is the one it joined with. The renewal goes over a connection
// of its own (leaseConn), not the pool: a replica recovering hundreds of
// runs after a database fault holds every pooled connection, and a
// renewal queued behind their writes lapsed its lease, which stopped the
// runs again.
//
// The first renewal, the replica joining, goes over a connection of the
// pool that is idle at that moment, if one is, and the lease's connection
// is dialled in the background a sixth of ttl later (aheadAfter), before
// the renewals after it (every third of ttl): a new backend's start is
// not on the way of a process's first run (runbook run on a database),
// and a run that ends sooner opens no second connection at all.
func (s *Store) KeepReplica(ctx context.Context, replica string, kind state.ReplicaKind, ttl time.Duration) error {
	// QueryExecModeExec: one round trip, where a statement's first use on
	// a connection by the default mode is two (prepare, execute); the
	// renewal comes every few seconds, and a process's first one is on
	// the way of its first run.
	args := []any{pgx.QueryExecModeExec, replica, string(kind), ttl.Microseconds()}
	done, err := false, error(nil)
	if s.lease.dialAhead(aheadAfter(ttl)) {
		done, err = s.execOnIdle(ctx, keepReplica, args...)
	}
	if !done {
		err = s.lease.exec(ctx, keepReplica, args...)
	}
	if err != nil {
		return fmt.Errorf("keep replica lease: %w", classify(err))
	}
	return nil
}

// execOnIdle runs sql over a connection of the pool that is idle now, and
// reports false, having done nothing, when none is: it does not wait for
// one (a millisecond at most).
func (s *Store) execOnIdle(ctx context.Context, sql string, args ...any) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, time.Millisecond)
	conn, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		return false, nil
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, sql, args...)
	return true, err
}

// keepReplica writes replica $1's row, of kind $2, its lease ending $3
// microseconds from now.
const keepReplica = `INSERT INTO runbook_replicas (id, kind, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at`

// DropReplica implements state.Coordinator: the lease ends now, and the
// replicas are told there are runs to take. The rows of replicas whose
// lease ended over an hour ago (replicaForgetAfter) and that own no
// unfinished run go: without that, every runbook run process on the
// database left one behind. The row of a replica that owns an unfinished
// run stays: it says whether that run was interrupted
// (engine.Interrupted) and when it may be taken over. The hour keeps the
// row of a replica that is only paused: one that wakes renews its lease
// (KeepReplica writes the row again) long before.
func (s *Store) DropReplica(ctx context.Context, replica string) error {
	_, err := s.pool.Exec(ctx, `WITH d AS (UPDATE runbook_replicas SET expires_at = now() WHERE id = $1),
		gone AS (DELETE FROM runbook_replicas p WHERE p.expires_at < now() - $2 * interval '1 microsecond' AND NOT EXISTS (
			SELECT 1 FROM runbook_runs r WHERE r.owner = p.id AND r.parent_id = ''
			AND r.status IN ('pending', 'running', 'waiting', 'suspended')))
		SELECT pg_notify('runbook_work:' || current_schema(), '')`,
		pgx.QueryExecModeExec, replica, replicaForgetAfter.Microseconds()) // once a process: one round trip (see KeepReplica)
	if err != nil {
		return fmt.Errorf("drop replica lease: %w", err)
	}
	return nil
}

// replicaForgetAfter is how long after its lease ended a replica's row
// stays when it owns no unfinished run (DropReplica).
const replicaForgetAfter = time.Hour

// Replica implements state.Coordinator.
func (s *Store) Replica(ctx context.Context, owner string) (kind state.ReplicaKind, expired bool, err error) {
	var k string
	err = s.pool.QueryRow(ctx, `SELECT kind, expires_at <= now() FROM runbook_replicas WHERE id = $1`, owner).Scan(&k, &expired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("look up replica: %w", err)
	}
	return state.ReplicaKind(k), expired, nil
}

// Lead implements state.Coordinator, as River elects its leader: term 0
// inserts the lease, or takes it over when it expired (the term goes up);
// a term renews the lease only if holder still holds it with that term.
func (s *Store) Lead(ctx context.Context, name, holder string, term int64, ttl time.Duration) (int64, error) {
	var row pgx.Row
	if term == 0 {
		row = s.pool.QueryRow(ctx, `INSERT INTO runbook_leases AS l (name, holder, term, expires_at)
			VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
			ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, term = l.term + 1, expires_at = EXCLUDED.expires_at
			WHERE l.expires_at < now()
			RETURNING term`, name, holder, ttl.Microseconds())
	} else {
		row = s.pool.QueryRow(ctx, `UPDATE runbook_leases SET expires_at = now() + $4 * interval '1 microsecond'
			WHERE name = $1 AND holder = $2 AND term = $3
			RETURNING term`, name, holder, term, ttl.Microseconds())
	}
	var got int64
	switch err := row.Scan(&got); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("lease %s: %w", name, err)
	}
	return got, nil
}

// Resign implements state.Coordinator: the lease expires now, so the
// next replica to ask takes it with the next term.
func (s *Store) Resign(ctx context.Context, name, holder string, term int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE runbook_leases SET expires_at = now() - interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND term = $3`, name, holder, term)
	if err != nil {
		return fmt.Errorf("resign lease %s: %w", name, err)
	}
	return nil
}

// leaseConn is the connection replica leases are renewed on, apart from
// the pool; it is opened at the first renewal and again after an error.
type leaseConn struct {
	cfg    *pgx.ConnConfig
	mu     sync.Mutex
	conn   *pgx.Conn
	dialed bool        // dialAhead called
	timer  *time.Timer // dialAhead's, until it fires
	closed bool
	ahead  sync.WaitGroup // dialAhead's dial, from its call until it is done or stopped
}

// aheadAfter is how long after a replica joins with lease ttl its lease
// connection is dialled: a sixth of ttl, well before the second renewal
// (a third of ttl after the first).
func aheadAfter(ttl time.Duration) time.Duration { return ttl / 6 }

// dialAhead starts dialling the connection in the background after
// delay, and reports true the first time it is called; false after.
// Closed before then, nothing is dialled.
func (l *leaseConn) dialAhead(delay time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dialed || l.closed {
		return false
	}
	l.dialed = true
	l.ahead.Add(1)
	l.timer = time.AfterFunc(delay, func() {
		defer l.ahead.Done()
		l.mu.Lock()
		skip := l.closed || l.conn != nil
		l.mu.Unlock()
		if skip {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
		if err != nil {
			return // exec dials when it needs the connection
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed || l.conn != nil {
			_ = conn.Close(ctx)
			return
		}
		l.conn = conn
	})
	return true
}

// exec runs sql on the lease connection, connecting first when there is
// none. After an error the connection is closed (it may be cut or in an
// unknown state) and the next exec connects anew.
func (l *leaseConn) exec(ctx context.Context, sql string, args ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
		if err != nil {
			return err
		}
		l.conn = conn
	}
	_, err := l.conn.Exec(ctx, sql, args...)
	if err != nil {
		l.closeLocked()
	}
	return err
}

func (l *leaseConn) close() {
	l.mu.Lock()
	l.closed = true
	l.closeLocked()
	if l.timer != nil && l.timer.Stop() {
		l.ahead.Done() // never dialled
	}
	l.mu.Unlock()
	l.ahead.Wait() // a connection dialled ahead is closed as it arrives
}

func (l *leaseConn) closeLocked() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}
