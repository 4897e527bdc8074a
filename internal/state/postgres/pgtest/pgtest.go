package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The environment variables the harness reads.
const (
	// EnvServer names an existing server to use instead of starting one.
	EnvServer = "RUNBOOK_TEST_POSTGRES"
	// EnvRequire=1 (or CI=true) makes a missing server a failure, not a skip.
	EnvRequire = "RUNBOOK_REQUIRE_POSTGRES"
)

// stmtTimeout bounds each statement the harness runs (creating and dropping
// databases).
const stmtTimeout = time.Minute

// errNoServer is why DB skips: neither EnvServer nor the binaries.
var errNoServer = errors.New("no PostgreSQL server for the tests")

var (
	mainCalled atomic.Bool
	setupOnce  sync.Once
	shared     *cluster // the server and template of this test binary
	setupErr   error    // why there is none
)

// Main runs the tests of m, then stops the server the tests started (or
// drops this binary's database from an external server). Call it from
// TestMain: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// DB returns a URL (with its password) for t of the test binary's
// database with a new, empty schema first on its search path: the tables
// t creates are its own, and are dropped with the schema when t ends. The
// first call starts the server (see the package documentation). Without a server it skips t, or fails it when
// RUNBOOK_REQUIRE_POSTGRES=1 or CI=true.
func DB(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: the test binary did not call pgtest.Main: add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	setupOnce.Do(func() { shared, setupErr = setup() })
	if setupErr != nil {
		unavailable(t, setupErr, required())
		return ""
	}
	dsn, drop, err := shared.create()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// required reports whether a missing server fails the tests.
func required() bool {
	return os.Getenv(EnvRequire) == "1" || os.Getenv("CI") == "true"
}

// unavailable skips t for a missing server unless the server is required;
// any other setup error (a server that would not start) fails t.
func unavailable(t testing.TB, err error, required bool) {
	t.Helper()
	if errors.Is(err, errNoServer) && !required {
		t.Skipf("pgtest: %v", err)
		return
	}
	t.Fatalf("pgtest: %v", err)
}

// setup finds or starts the server and creates this binary's database on
// it.
func setup() (*cluster, error) {
	if dsn := os.Getenv(EnvServer); dsn != "" {
		base, err := parseURL(dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvServer, err)
		}
		return newCluster(base, nil)
	}
	bin, err := findBinaries(binPattern)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(bin)
	if err != nil {
		return nil, err
	}
	c, err := newCluster(srv.url("postgres"), srv)
	if err != nil {
		return nil, errors.Join(err, srv.stop())
	}
	return c, nil
}

// parseURL accepts a postgres:// or postgresql:// URL. Errors never repeat
// the URL, which may hold a password.
func parseURL(dsn string) (*url.URL, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New("not a URL (want postgres://user:password@host:port/db)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("scheme %q: want postgres://user:password@host:port/db", u.Scheme)
	}
	return u, nil
}

// cluster is a server with this binary's database on it.
type cluster struct {
	base     *url.URL // the server, as given or started
	local    *server  // nil on an external server
	database string   // this binary's database
	next     atomic.Int64

	mu    sync.Mutex // each of admin and conn is one connection
	admin *link      // to base: creates and drops the database
	conn  *link      // to the database: creates and drops schemas
}

// link is one of the harness's connections, opened again when a fault
// (Terminate, Restart, a test's own pg_terminate_backend) closed it.
type link struct {
	url  string
	conn *pgx.Conn
}

// dial opens a link to url.
func dial(ctx context.Context, url string) (*link, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	return &link{url: url, conn: conn}, nil
}

// use runs f on the link's connection, connecting again first when it is
// closed, and once more on a new connection when f failed because the
// connection was lost (a terminated backend answers the next statement
// with a FATAL error and closes; the statement did not run).
func (l *link) use(ctx context.Context, f func(ctx context.Context) error) error {
	if l.conn.IsClosed() {
		if err := l.redial(ctx); err != nil {
			return err
		}
	}
	err := f(ctx)
	if err == nil || !l.conn.IsClosed() {
		return err
	}
	if errDial := l.redial(ctx); errDial != nil {
		return errors.Join(err, errDial)
	}
	return f(ctx)
}

func (l *link) redial(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, l.url)
	if err != nil {
		return fmt.Errorf("connect again: %w", err)
	}
	l.conn = conn
	return nil
}

func (l *link) close(ctx context.Context) { _ = l.conn.Close(ctx) }

// newCluster connects to base and creates this binary's database, a copy
// of template0 (an operator's template1 may hold anything).
func newCluster(base *url.URL, local *server) (*cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	admin, err := dial(ctx, base.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redacted(base), err)
	}
	c := &cluster{base: base, local: local, admin: admin, database: "runbook_test_" + randomHex(4)}
	if _, err := admin.conn.Exec(ctx, "CREATE DATABASE "+quote(c.database)+" TEMPLATE template0 ENCODING 'UTF8'"); err != nil {
		admin.close(ctx)
		return nil, fmt.Errorf("create database on %s (the role needs CREATEDB): %w", redacted(base), err)
	}
	if c.conn, err = dial(ctx, c.url("").String()); err != nil {
		err = errors.Join(fmt.Errorf("connect to database %s: %w", c.database, err), c.dropDatabase())
		admin.close(ctx)
		return nil, err
	}
	return c, nil
}

// url is the URL of the binary's database with schema (when not empty)
// first on the search path, so that unqualified names are its.
func (c *cluster) url(schema string) *url.URL {
	u := *c.base
	u.Path = "/" + c.database
	if schema != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
	}
	return &u
}

// create makes a new schema and returns the URL that works in it and the
// function that drops it.
func (c *cluster) create() (dsn string, drop func() error, err error) {
	name := fmt.Sprintf("test_%d", c.next.Add(1))
	if err := c.exec(c.conn, "CREATE SCHEMA "+quote(name)); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	drop = func() error {
		if err := c.exec(c.conn, "DROP SCHEMA IF EXISTS "+quote(name)+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	return c.url(name).String(), drop, nil
}

func (c *cluster) exec(l *link, sql string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	return l.use(ctx, func(ctx context.Context) error {
		_, err := l.conn.Exec(ctx, sql)
		return err
	})
}

// dropDatabase drops the binary's database, cutting any connection a test
// left open (WITH (FORCE): PostgreSQL 13 and later).
func (c *cluster) dropDatabase() error {
	if err := c.exec(c.admin, "DROP DATABASE IF EXISTS "+quote(c.database)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", c.database, err)
	}
	return nil
}

// close drops the database and, on a server the tests started, stops it
// and removes its directory.
func (c *cluster) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	c.conn.close(ctx)
	errDrop := c.dropDatabase()
	c.admin.close(ctx)
	if c.local == nil {
		return errDrop
	}
	return c.local.stop() // the database goes with the server
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// redacted is u without its password, for messages.
func redacted(u *url.URL) string { return u.Redacted() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
