package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// listenGate is a PostgreSQL store whose Listen, after the first one,
// waits for the test to open gate: the test breaks the notice connection
// for real (cutListens), records what it wants while the replica does
// not listen, then lets it listen again.
type listenGate struct {
	*postgres.Store
	listens atomic.Int32
	gate    chan struct{}
}

func (g *listenGate) Listen(ctx context.Context, fn func(state.Notice)) error {
	if g.listens.Add(1) > 1 {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Listen(ctx, fn)
}

// replicaOn starts a server on a database (a replica: lease 2 s) whose
// store is st, with the playbooks given.
func replicaOn(t *testing.T, st state.Store, playbooks map[string]string, opts ...envOption) *env {
	t.Helper()
	dir := t.TempDir()
	for name, src := range playbooks {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	o := server.Options{
		Engine:    engine.Options{Store: st, Environ: os.Environ()},
		Playbooks: dir, Listen: "127.0.0.1:0", Token: token, ShutdownGrace: 5 * time.Second, Lease: 2 * time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	return serveEnv(t, o, func(runErr error) { assert.NoError(t, runErr) })
}

// cutListens breaks every notice connection to the database dsn
// (pg_terminate_backend of the sessions whose last statement was a
// LISTEN) and waits until the replica listens again, held at g's gate.
func cutListens(t *testing.T, dsn string, g *listenGate) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'`).Scan(&n))
	require.Equal(t, 1, n, "the replica's notice connection")
	require.Eventually(t, func() bool { return g.listens.Load() == 2 }, 10*time.Second, 5*time.Millisecond,
		"the replica tries to listen again")
}

func newListenGate(t *testing.T) (*listenGate, *postgres.Store, string) {
	t.Helper()
	dsn := pgtest.DB(t)
	return &listenGate{Store: openPG(t, dsn), gate: make(chan struct{})}, openPG(t, dsn), dsn
}

// An approval answered (by another replica, or runbook runs approve on
// the database) while the notice connection of the replica holding the
// run parked is down is heard once it listens again: the run goes on
// then, not at its approval's deadline an hour later.
func TestAnApprovalAnsweredWhileTheNoticeConnectionIsDownWakesTheRunOnceItListensAgain(t *testing.T) {
	g, other, dsn := newListenGate(t)
	e := replicaOn(t, g, map[string]string{"gated.yaml": `version: 1
name: gated
steps:
  - {id: gate, uses: approval, with: {message: "go?", timeout: 1h}}
  - {id: after, uses: log, with: {message: approved}}
`})
	id := e.startRun("gated", nil)
	e.waitStatus(id, state.RunWaiting)
	e.waitParked(1)

	cutListens(t, dsn, g)
	answerer := engine.New(engine.Options{Store: other, Process: "another-replica/1"})
	require.NoError(t, answerer.Approve(context.Background(), id, "gate", state.Approval{Approved: true, By: "alice"}))
	close(g.gate)

	e.waitStatus(id, state.RunSucceeded)
}

// A cancel recorded while the notice connection of the replica executing
// the run is down stops the run once the replica listens again: its step
// is cut, the step after never runs, its finally step runs, and it ends
// cancelled.
func TestACancelRecordedWhileTheNoticeConnectionIsDownStopsTheRunOnceItListensAgain(t *testing.T) {
	g, other, dsn := newListenGate(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "never")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	e := replicaOn(t, g, map[string]string{"stuck.yaml": fmt.Sprintf(`version: 1
name: stuck
steps:
  - {id: work, uses: shell, with: {command: "read x < %s"}}
  - {id: after, uses: shell, with: {command: "echo after >> %s"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo finally >> %s"}}
`, fifo, filepath.Join(dir, "after.txt"), filepath.Join(dir, "finally.txt"))})
	id := e.startRun("stuck", nil)
	e.waitStatus(id, state.RunRunning) // its first step waits for ever

	cutListens(t, dsn, g)
	ctx := context.Background()
	run, err := other.GetRun(ctx, id)
	require.NoError(t, err)
	run.Status, run.EndedAt = state.RunCancelled, time.Now()
	run.Error = &state.ErrorRecord{Code: "cancelled", Message: "run cancelled by bob"}
	require.NoError(t, other.SaveRun(ctx, run, state.Event{Type: "run.cancelled", Message: "run cancelled by bob"}))
	close(g.gate)

	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "finally.txt"))
		return string(b) == "finally\n"
	}, 10*time.Second, 10*time.Millisecond, "its finally step runs")
	require.Eventually(t, func() bool { return !e.srv.Engine().Executing(id) }, 10*time.Second, 10*time.Millisecond, "the run ends here")
	got, err := other.GetRun(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, got.Status, "it ends cancelled")
	_, err = os.Stat(filepath.Join(dir, "after.txt"))
	assert.True(t, os.IsNotExist(err), "the step after never ran")
}
