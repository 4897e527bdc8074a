// Package pgtest gives each test a fresh, empty place in a real PostgreSQL
// server, for the PostgreSQL state store and anything built on it.
//
// A test package calls Main from its TestMain and DB from each test:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.DB(t) // postgres://...?search_path=test_7, dropped when t ends
//		...
//	}
//
// # Where the server comes from
//
// When RUNBOOK_TEST_POSTGRES holds the URL of an existing server
// (postgres://user:password@host:port/db, a role allowed to create
// databases), the test binary creates one uniquely named database on it
// (runbook_test_<random>) and drops it when Main returns.
//
// Otherwise the first DB call starts a throwaway server: Debian's binaries
// (/usr/lib/postgresql/<version>/bin/initdb and postgres, the newest
// version found) initialize a cluster in a new directory under
// os.TempDir() and run it on a free port of 127.0.0.1 only, its socket in
// that directory, password authentication with a random password. fsync
// stays on, as in production: benchmarks then measure a durable commit,
// as bolt's do, and on a local disk a commit's flush costs a fraction of a
// millisecond. Only initdb runs with --no-sync (a crash while it runs
// loses nothing: the cluster is thrown away).
// PostgreSQL refuses to run as root: when the tests run as root (CI does),
// initdb and postgres run as the system user "postgres" (which Debian's
// package creates) and the directory is made theirs.
//
// The first DB call also creates the test binary's database, a copy of
// template0. Each DB call creates a schema in it (test_<n>) and returns a
// URL with search_path=test_<n>: what the test creates without naming a
// schema goes there, out of every other test's sight, and is dropped
// with the schema when the test ends. A schema costs a tenth of a
// millisecond; a database per test (CREATE DATABASE ... TEMPLATE) was
// measured at 70 to 100 ms to create and up to 140 ms to drop (it
// WAL-logs or checkpoints the whole catalog), seconds over the store's
// contract suite.
//
// # Faults
//
// Terminate ends every client connection to the binary's database
// (pg_terminate_backend) and Restart stops the throwaway server with a
// fast shutdown and starts it again on the same directory and port
// (pg_ctl -m fast restart), so a test can inject the faults an operator
// or a failover causes. Both act on the server every test of the binary
// shares: a test that uses them must not run in parallel with others. The
// harness's own connections are opened again after either.
//
// # When there is no server
//
// Without the environment variable and without the binaries, DB skips the
// test, saying what it looked for and how to get it (apt-get install
// postgresql, or set RUNBOOK_TEST_POSTGRES). When RUNBOOK_REQUIRE_POSTGRES=1
// or CI=true, DB fails the test instead, so a CI machine that lost its
// server cannot pass by skipping.
//
// # Bounds and cleanup
//
// Every wait is bounded: initdb (2 minutes), the server accepting
// connections (1 minute), each statement of the harness (1 minute) and the
// stop (a fast shutdown, then SIGKILL after 10 seconds). Main stops the
// server and removes its directory after the tests. The server runs in its
// own process group, so a Ctrl-C meant for the tests does not reach it
// directly, and with a parent-death signal (SIGQUIT, PostgreSQL's
// immediate shutdown): if the test binary crashes or is killed (a panic,
// go test's -timeout, SIGKILL), the kernel stops the server at once (on
// Linux: other systems have no such signal, and there a killed binary's
// server runs on until it is stopped by hand). Only
// its directory (runbook-pgtest-<pid>-*) is left behind, and the next
// test binary that starts a server removes the directories of processes
// that no longer exist. On an external server a crashed binary leaves its
// databases (runbook_test_*) for the operator to drop.
package pgtest
