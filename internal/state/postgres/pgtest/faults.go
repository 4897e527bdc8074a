package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// Restart checkpoints, then stops the test binary's server with a fast shutdown (every
// connection is cut, its transaction rolled back), waits down, and starts
// it again on the same data directory and port, as pg_ctl -m fast restart
// does. It returns the time the server accepted a connection again. The
// URLs DB gave stay valid: a client that reconnects finds its schema and
// its committed rows. Every wait is bounded (the stop's and the start's,
// see the package documentation); a server that does not come back fails
// t. The server is the binary's, shared by its tests: a test that restarts
// it must not run beside others (no t.Parallel). On an external server
// (RUNBOOK_TEST_POSTGRES), which is the operator's, t is skipped.
func Restart(t testing.TB, down time.Duration) time.Time {
	t.Helper()
	c := faultable(t)
	if c.local == nil {
		t.Skipf("pgtest: the tests use the server of %s, which they do not restart", EnvServer)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A checkpoint first, as an operator's planned restart does: the fast
	// stop's own checkpoint then has little to write and ends within
	// stopTimeout on a busy machine. Without it, at load average 6 the
	// stop's checkpoint outlasted stopTimeout, the server was stopped
	// immediately, and its start replayed every write since the last
	// checkpoint for over readyTimeout. What the fault does to the
	// clients is the same: their connections end and are refused until
	// the server is back.
	ctx, cancel := context.WithTimeout(context.Background(), 6*stopTimeout)
	if err := c.admin.use(ctx, func(ctx context.Context) error {
		_, err := c.admin.conn.Exec(ctx, "CHECKPOINT")
		return err
	}); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: checkpoint before the restart: %v\n", err)
	}
	cancel()
	if err := c.local.restart(down); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
	return time.Now()
}

// Terminate ends every client connection to the test binary's database
// (pg_terminate_backend, SQLSTATE 57P01 at the client, as when an
// operator or a failover cuts them) except the harness's own, and returns
// how many it ended. The connections of every test of the binary go: a
// test that terminates them must not run beside others.
func Terminate(t testing.TB) int {
	t.Helper()
	c := faultable(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), stmtTimeout)
	defer cancel()
	var n int
	err := c.admin.use(ctx, func(ctx context.Context) error {
		return c.admin.conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND pid <> $2`,
			c.database, c.conn.conn.PgConn().PID()).Scan(&n)
	})
	if err != nil {
		t.Fatalf("pgtest: terminate the connections to %s: %v", c.database, err)
	}
	return n
}

// faultable returns the binary's cluster, set up by an earlier DB call.
func faultable(t testing.TB) *cluster {
	t.Helper()
	if shared == nil {
		t.Fatal("pgtest: no server yet: call DB before injecting a fault into it")
	}
	return shared
}

// restart is Restart on the local server: a fast stop, down, then the same
// directory and port.
func (s *server) restart(down time.Duration) error {
	if err := s.halt(); err != nil {
		// A fast shutdown's checkpoint outlasted stopTimeout on a loaded
		// machine: the server was killed, which is down all the same
		// (it recovers at the start).
		fmt.Fprintf(os.Stderr, "pgtest: restart: %v\n", err)
	}
	time.Sleep(down)
	bin, err := findBinaries(binPattern)
	if err != nil {
		return err
	}
	cred, err := serverUser()
	if err != nil {
		return err
	}
	if err := s.run(bin, cred, s.port); err != nil {
		return err
	}
	if err := s.waitReady(); err != nil {
		return errors.Join(err, s.halt())
	}
	return nil
}

// halt shuts the server down (fast), killing it if it has not exited
// within stopTimeout, and keeps its directory.
func (s *server) halt() error {
	if s.proc == nil {
		return nil
	}
	_ = s.proc.Signal(os.Interrupt)
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	// An immediate shutdown (SIGQUIT): the postmaster stops its backends
	// and exits without a checkpoint. SIGKILL would leave the backends
	// (each in a session of its own) holding the shared memory that a
	// start on the same directory refuses.
	_ = s.proc.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
		return fmt.Errorf("postgres did not stop within %s; stopped immediately:\n%s", stopTimeout, s.logTail())
	case <-time.After(stopTimeout):
		_ = s.proc.Kill()
		<-s.exited
		return fmt.Errorf("postgres did not stop within %s and was killed:\n%s", 2*stopTimeout, s.logTail())
	}
}
