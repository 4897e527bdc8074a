package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestDBGivesEachTestAnEmptySchemaOfItsOwn(t *testing.T) {
	ctx := context.Background()
	var schemas []string
	for i := range 2 {
		t.Run(fmt.Sprint("test ", i), func(t *testing.T) {
			conn, err := pgx.Connect(ctx, DB(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var schema string
			var tables int
			err = conn.QueryRow(ctx, `SELECT current_schema(), (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())`).Scan(&schema, &tables)
			if err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("schema %s has %d tables, want none", schema, tables)
			}
			// Unqualified: it must land in the test's schema, and the
			// next test must not see it.
			if _, err := conn.Exec(ctx, `CREATE TABLE t (x int)`); err != nil {
				t.Fatal(err)
			}
			schemas = append(schemas, schema)
		})
	}
	if len(schemas) == 2 && schemas[0] == schemas[1] {
		t.Errorf("both tests got schema %s", schemas[0])
	}
}

func TestASchemaIsDroppedWhenItsTestEnds(t *testing.T) {
	ctx := context.Background()
	var dsn string
	t.Run("user", func(t *testing.T) {
		dsn = DB(t)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE left_behind (x int)`); err != nil {
			t.Fatal(err)
		}
	})
	if dsn == "" {
		t.Skip("no server")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if schema != nil {
		t.Errorf("schema %s is still there", *schema)
	}
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'left_behind'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the test's table is still there")
	}
}

func TestTheServerListensOnLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, DB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if os.Getenv(EnvServer) != "" {
		t.Skip("an external server is the operator's")
	}
	var listen string
	if err := conn.QueryRow(ctx, `SHOW listen_addresses`).Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if listen != "127.0.0.1" {
		t.Errorf("listen_addresses = %q, want 127.0.0.1", listen)
	}
}

// TestAServerStartsAndStops starts a second throwaway server beside the
// shared one and stops it: it accepted connections, then no longer does,
// and its directory is gone.
func TestAServerStartsAndStops(t *testing.T) {
	bin, err := findBinaries(binPattern)
	if err != nil && os.Getenv(EnvServer) != "" {
		t.Skipf("the tests use the server of %s; no local binaries to start one: %v", EnvServer, err)
	}
	if err != nil {
		unavailable(t, err, required())
	}
	srv, err := startServer(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.url("postgres").String())
	if err != nil {
		_ = srv.stop()
		t.Fatal(err)
	}
	var version string
	err = conn.QueryRow(ctx, `SHOW server_version`).Scan(&version)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s in %s", version, srv.dir)

	start := time.Now()
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %s", time.Since(start))
	select {
	case <-srv.exited:
	default:
		t.Fatal("the server process is still running")
	}
	if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
		t.Errorf("server directory %s: %v, want it removed", srv.dir, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(cctx, srv.url("postgres").String()); err == nil {
		conn.Close(ctx)
		t.Error("a stopped server accepted a connection")
	}
}

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skipf(format string, a ...any)  { r.skipped = fmt.Sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestWithoutAServerTestsSkipUnlessOneIsRequired(t *testing.T) {
	_, missing := findBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	if !errors.Is(missing, errNoServer) {
		t.Fatalf("findBinaries in an empty directory: %v, want errNoServer", missing)
	}
	for _, hint := range []string{EnvServer, "apt-get install postgresql", EnvRequire} {
		if !strings.Contains(missing.Error(), hint) {
			t.Errorf("message %q does not mention %q", missing, hint)
		}
	}
	cases := []struct {
		name     string
		err      error
		required bool
		skip     bool
	}{
		{"a missing server skips", missing, false, true},
		{"a missing server fails when one is required", missing, true, false},
		{"a server that will not start fails", errors.New("initdb: exit status 1"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			unavailable(r, tc.err, tc.required)
			if tc.skip && (r.skipped == "" || r.failed != "") {
				t.Errorf("skipped %q, failed %q: want a skip", r.skipped, r.failed)
			}
			if !tc.skip && (r.failed == "" || r.skipped != "") {
				t.Errorf("skipped %q, failed %q: want a failure", r.skipped, r.failed)
			}
		})
	}
}

func TestCIRequiresAServer(t *testing.T) {
	for _, tc := range []struct {
		require, ci string
		want        bool
	}{
		{"", "", false},
		{"1", "", true},
		{"", "true", true},
		{"0", "false", false},
	} {
		t.Setenv(EnvRequire, tc.require)
		t.Setenv("CI", tc.ci)
		if got := required(); got != tc.want {
			t.Errorf("%s=%q CI=%q: required = %v, want %v", EnvRequire, tc.require, tc.ci, got, tc.want)
		}
	}
}

func TestNewestVersionIsPicked(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13", "16"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if v == "16" {
			continue // no binaries: not a usable version
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := findBinaries(filepath.Join(root, "*", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin"); got != want {
		t.Errorf("picked %s, want %s", got, want)
	}
}

func TestAnExternalServerMustBeAPostgresURL(t *testing.T) {
	for _, dsn := range []string{"mysql://u:secret@h/db", "host=h password=secret", "::"} {
		_, err := parseURL(dsn)
		if err == nil {
			t.Errorf("%q accepted", dsn)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q repeats the password", err)
		}
	}
	for _, dsn := range []string{"postgres://u:p@h:5432/db", "postgresql://h/db?sslmode=disable"} {
		if _, err := parseURL(dsn); err != nil {
			t.Errorf("%q: %v", dsn, err)
		}
	}
}
