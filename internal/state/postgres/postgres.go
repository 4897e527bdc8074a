package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
)

var _ state.Store = (*Store)(nil)

// DefaultTimeout bounds Open (connecting, waiting for another replica's
// migration, migrating) when Options.Timeout is zero and ctx has no
// earlier deadline.
const DefaultTimeout = 30 * time.Second

// lockReleaseTimeout bounds releasing the migration lock after a failed or
// cancelled Open.
const lockReleaseTimeout = 5 * time.Second

// maxAttempts bounds how often a transaction that PostgreSQL aborted for
// a deadlock or a serialization failure is run again.
const maxAttempts = 5

// Options configure Open.
type Options struct {
	// Now is the clock used for deduplication expiry and for defaults (an
	// event, run or lock without a time). Default time.Now. Replicas
	// compare each other's times: keep their clocks synchronized.
	Now func() time.Time
	// Logger receives the migrations applied at Open. Default: none.
	Logger *slog.Logger
	// Timeout bounds Open (default DefaultTimeout), migrations included:
	// a migration that outlasts it is rolled back, so one that rewrites a
	// large table needs a longer Timeout.
	Timeout time.Duration
	// MaxConns caps the connection pool (0: the DSN's pool_max_conns, else
	// DefaultMaxConns).
	MaxConns int32
}

// DefaultMaxConns is the pool's size when neither Options.MaxConns nor
// the DSN's pool_max_conns sets it: 4 per CPU, at least 16. A durable
// commit waits for its WAL flush; commits in flight on other connections
// share that flush (PostgreSQL's group commit), so concurrent writers
// (webhook senders, executing runs) need connections to commit side by
// side. With pgxpool's own default (4 on two CPUs) 32 webhook senders
// queued for 4 connections: BenchmarkIntake/postgres (internal/trigger)
// took 1,065-1,947 deliveries a second on a loaded 2-CPU machine, 2,212-
// 2,764 with 16. Three replicas at 16 stay under PostgreSQL's default
// max_connections (100).
func DefaultMaxConns() int32 { return int32(max(16, 4*runtime.NumCPU())) }

// Store is a state.Store in a PostgreSQL database, shared by every
// replica that opens it.
type Store struct {
	pool   classifiedPool
	now    func() time.Time
	target string // host:port/database, for messages (never the password)
	// retries counts transactions run again after PostgreSQL aborted
	// them (deadlock, serialization failure).
	retries atomic.Int64
	// groups commits new webhook deliveries together (see commitGroup).
	groups *groupQueue[*groupReq]
	// writes commits concurrent runs' writes together (see commitWrites).
	writes *groupQueue[*runWrite]
	// claims claims runs together (see claimGroup).
	claims *claimGrouper
	// locks takes free concurrency keys together (see lockGroup).
	locks *groupQueue[*lockReq]
	// committedKeys are the concurrency keys taken by delivery commits
	// for their runs (see groupInsert), until the runs ask for them.
	committedKeys committedKeys
	// bodies keeps the bodies of deliveries committed here.
	bodies bodyCache
	// prunes paces the deletion of expired dedup keys (see prunePace).
	prunes prunePace
	// snapshots are the playbook snapshots seen committed.
	snapshots storedSnapshots
	// lease is the connection KeepReplica renews leases on.
	lease leaseConn
}

// Open connects to the database at dsn (a postgres:// or postgresql://
// URL, or libpq's key=value form), applies the migrations it lacks and
// returns the store. Errors are coded (internal/fault): Invalid for a DSN
// that does not parse, Unavailable for a server that cannot be reached.
// Neither the DSN's password nor the DSN itself appears in an error or a
// log line.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, unavailable(cfg, err)
	}
	// The first connection is the migrations' (no ping before it: a
	// round trip that every command on a database paid).
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, unavailable(cfg, err)
	}
	log := opts.Logger.With("database", target(cfg))
	err = migrate(ctx, conn.Conn(), log)
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open state database %s: %w", target(cfg), err)
	}
	s := &Store{pool: classifiedPool{pool}, now: opts.Now, target: target(cfg), lease: leaseConn{cfg: cfg.ConnConfig}}
	s.groups, s.writes, s.claims, s.locks = newDeliveryQueue(s), newWriteQueue(s), newClaimGrouper(s), newLockQueue(s)
	s.prunes.every = pruneEvery
	return s, nil
}

// urlScheme matches the scheme of a URL (a key=value DSN has none).
var urlScheme = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*)://`) })

// parseDSN parses a DSN into a pool configuration, refusing URLs of other
// schemes (which libpq's key=value parser would misread).
func parseDSN(dsn string) (*pgxpool.Config, error) {
	if m := urlScheme().FindStringSubmatch(dsn); m != nil && m[1] != "postgres" && m[1] != "postgresql" {
		return nil, fault.Errorf(fault.Invalid, "state database: scheme %q: want a postgres:// or postgresql:// URL", m[1])
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors carry the DSN with its password redacted.
		return nil, fault.Errorf(fault.Invalid, "state database: %w", err)
	}
	return cfg, nil
}

// target names the database for messages: host:port/database.
func target(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	host := c.Host
	if !strings.HasPrefix(host, "/") { // not a socket directory
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	}
	return host + "/" + c.Database
}

func unavailable(cfg *pgxpool.Config, err error) error {
	return fault.Errorf(fault.Unavailable, "state database %s: %w", target(cfg), err)
}

// Target names the database the store is on (host:port/database), for
// messages; it never includes the password.
func (s *Store) Target() string { return s.target }

// Close closes the lease connection and the pool, waiting for the
// connections in use to be returned.
func (s *Store) Close() error {
	s.lease.close()
	s.pool.Close()
	return nil
}

// write runs fn in a transaction and commits it. PostgreSQL aborts a
// transaction that deadlocks or fails to serialize with another; write
// then runs fn again (up to maxAttempts in all), so fn must be safe to run
// more than once and reset at its start whatever outer variables it sets.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool.Pool, fn)
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return classify(err)
		}
		s.retries.Add(1)
	}
}

// send sends the statements queued in b in one round trip. Sent on its
// own, a batch is one implicit transaction: pgx follows its last
// statement with the batch's only Sync, so PostgreSQL commits the
// statements together there, or none of them if one fails. Their results
// are read, in order, by the callbacks queued with them; the first error,
// a statement's or a callback's, is returned. By the time a callback
// reads a result the server has run the batch through, so a batch is
// built so that what a callback refuses (a run that does not exist)
// leaves nothing written: a later statement then fails on a constraint
// or matches no row. A batch that PostgreSQL aborted for a deadlock or a
// serialization failure is sent again: callbacks reset what they set.
func (s *Store) send(ctx context.Context, b *pgx.Batch) error {
	return s.retry(ctx, func() error { return s.pool.SendBatch(ctx, b).Close() })
}

// maxAnswerWait bounds sendWrite's wait in a system call: an answer
// slower than that is waited for as any other, and a write cancelled
// meanwhile is noticed that much later at most.
const maxAnswerWait = 10 * time.Millisecond

// sendWrite is send for a run's write made alone (a fence and the
// write's statements, read by their callbacks when the batch is closed):
// it waits for the answer in a system call (awaitAnswer) before reading
// it. Waiting on the network poller instead idles every P of the Go
// runtime while the process has nothing else to do, as a run executing
// alone does, and the system call made next then restarts the runtime's
// monitor thread's 20 µs polling (runtime.sysmon, golang/go#18236): some
// fifty wake-ups a write, which cost a run of shell steps on PostgreSQL
// about as much processor time again as its steps (docs/performance.md).
// A thread waiting in a system call keeps its P, as bbolt's fdatasync
// does.
func (s *Store) sendWrite(ctx context.Context, b *pgx.Batch) error {
	return s.retry(ctx, func() error {
		c, err := s.pool.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		br := c.SendBatch(ctx, b)
		awaitAnswer(c.Conn().PgConn().Conn(), maxAnswerWait)
		return br.Close()
	})
}

// retry runs fn, a statement or a batch sent on its own, again when
// PostgreSQL aborted it for a deadlock or a serialization failure (up to
// maxAttempts in all).
func (s *Store) retry(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return classify(err)
		}
		s.retries.Add(1)
	}
}

// retryable reports whether PostgreSQL aborted a transaction that may
// succeed when run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") // serialization_failure, deadlock_detected
}

// isUniqueViolation reports a write refused by the named unique
// constraint (a claim already taken).
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// isForeignKeyViolation reports a write that names a run that does not
// exist.
func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// nullTime is t for a nullable timestamptz column: nil when zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// orEmpty is b for a NOT NULL bytea column: pgx writes a nil slice as NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
