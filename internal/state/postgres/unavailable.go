package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runbook/runbook/internal/state"
)

// classifiedPool is the store's connection pool. Its errors, and those of the rows
// it returns, are classified: one that trying again can cure wraps
// state.ErrUnavailable (see transient). write and send classify theirs.
type classifiedPool struct{ *pgxpool.Pool }

func (p classifiedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := p.Pool.Exec(ctx, sql, args...)
	return tag, classify(err)
}

func (p classifiedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := p.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	return classifiedRows{rows}, nil
}

func (p classifiedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{p.Pool.QueryRow(ctx, sql, args...)}
}

func (p classifiedPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.Pool.BeginTx(ctx, opts)
	return tx, classify(err)
}

type classifiedRows struct{ pgx.Rows }

func (r classifiedRows) Err() error             { return classify(r.Rows.Err()) }
func (r classifiedRows) Scan(dest ...any) error { return classify(r.Rows.Scan(dest...)) }

type classifiedRow struct{ pgx.Row }

func (r classifiedRow) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

// unavailableError is an error of the database that trying again can
// cure: it is a state.ErrUnavailable, with the driver's error as it is,
// and a state.ErrNotServing when down.
type unavailableError struct {
	err  error
	down bool
}

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }
func (e *unavailableError) Is(target error) bool {
	return target == state.ErrUnavailable || e.down && target == state.ErrNotServing
}

// classify wraps err in state.ErrUnavailable when transient says so.
func classify(err error) error {
	if !transient(err) || errors.Is(err, state.ErrUnavailable) {
		return err
	}
	return &unavailableError{err: err, down: notServing(err)}
}

// notServing reports whether err says that the database served no one
// when it was made: nothing listened on its address (the postmaster was
// gone: the one that comes next has a new pg_postmaster_start_time, which
// ClaimRuns waits a lease after), or it accepted no connection (57P03:
// starting up, shutting down, recovering after a crash, when every
// replica's own renewal fails too). A terminated connection (57P01, what
// pg_terminate_backend sends) is not: the server goes on serving others.
func notServing(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P03"
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// transientStates are the SQLSTATEs a retry can cure, besides class 08
// (connection exception): the server shutting down, crashed or starting
// (57P01 admin_shutdown, also what pg_terminate_backend sends, 57P02,
// 57P03), a transaction aborted for a conflict once write's own attempts
// are spent (40001, 40P01), and a server out of connections (53300).
var transientStates = []string{"57P01", "57P02", "57P03", "40001", "40P01", "53300"}

// transient reports whether err is one a retry can cure: a transient
// SQLSTATE, or the connection refused, reset or closed under the query
// (a server restarting, a connection terminated). An error of the
// caller's context is not: the caller stopped waiting. Neither is one the
// server gave with any other SQLSTATE (a refused password, a missing
// database, a disk full, a constraint).
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || slices.Contains(transientStates, pe.Code)
	}
	var (
		connect *pgconn.ConnectError
		netErr  net.Error
	)
	return errors.As(err, &connect) || errors.As(err, &netErr) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err)
}
