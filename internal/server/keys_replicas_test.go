package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// keyReplicaOn starts a replica of runbook serve named process on the
// database dsn, serving the playbooks of dir. Its poll for approvals and
// keys is an hour: only a notice wakes a run within a test.
func keyReplicaOn(t *testing.T, dsn, dir, process string) *env {
	t.Helper()
	store, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	return serveEnv(t, server.Options{
		Engine:  engine.Options{Store: store, Environ: []string{}, Process: process},
		KeyPoll: time.Hour, Playbooks: dir, Listen: "127.0.0.1:0", Token: token, Lease: 2 * time.Second, ShutdownGrace: 5 * time.Second,
	}, func(runErr error) {
		assert.NoError(t, runErr)
		require.NoError(t, store.Close())
	})
}

// twoReplicasOn starts replicas A and B on one fresh database with the
// keyed playbooks.
func twoReplicasOn(t *testing.T) (a, b *env) {
	dsn, dir := pgtest.DB(t), t.TempDir()
	for name, src := range keyedPlaybooks {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	return keyReplicaOn(t, dsn, dir, "replica-a/1"), keyReplicaOn(t, dsn, dir, "replica-b/2")
}

// A key released on replica B wakes at once the run parked on it on
// replica A (the database's notice: A's poll is an hour).
func TestAKeyReleasedOnOneReplicaWakesTheRunParkedOnAnother(t *testing.T) {
	a, b := twoReplicasOn(t)
	holder := b.startRun("holder", nil)
	b.waitParked(1)
	queued := a.startRun("queued", nil)
	a.waitParked(1)
	assert.Equal(t, "waiting", a.api("GET", "/api/v1/runs/"+queued, nil).json(t)["status"])

	r := b.api("POST", "/api/v1/runs/"+holder+"/approve", map[string]any{"approve": true, "by": "alice"})
	require.Equal(t, 200, r.status, "%s", r.body)
	b.waitStatus(holder, state.RunSucceeded)
	m := a.waitStatus(queued, state.RunSucceeded)
	assert.Equal(t, "replica-a/1", m["owner"], "A executed it")
	a.waitParked(0)
}

// A run with on_busy: cancel_running cancels the holder of its key even
// when the holder is another replica's: recorded cancelled, the holder
// ends cancelled there, which releases the key to the new run.
func TestCancelRunningCancelsAHolderOnAnotherReplica(t *testing.T) {
	a, b := twoReplicasOn(t)
	holder := b.startRun("sleeper", nil)
	b.waitParked(1)
	taker := a.startRun("taker", nil)
	a.waitStatus(taker, state.RunSucceeded)
	m := b.waitStatus(holder, state.RunCancelled)
	assert.Contains(t, m["error"].(map[string]any)["message"], "cancelled by run "+taker)
	steps := stepsByID(m)
	assert.Equal(t, "cancelled", steps["nap"]["status"], "B ended it: its waiting step cancelled")
	b.waitParked(0)
}

// A key released while the notice connection of the replica holding a
// run parked on it is down wakes the run once the replica listens again,
// not at its next poll.
func TestAKeyReleasedWhileTheNoticeConnectionIsDownWakesTheRunOnceItListensAgain(t *testing.T) {
	g, other, dsn := newListenGate(t)
	ctx := context.Background()
	ok, _, err := other.AcquireLock(ctx, state.Lock{Key: "k", Owner: "outsider"})
	require.NoError(t, err)
	require.True(t, ok)
	e := replicaOn(t, g, keyedPlaybooks)
	id := e.startRun("queued", nil)
	e.waitParked(1)

	cutListens(t, dsn, g)
	require.NoError(t, other.ReleaseLock(ctx, "k", "outsider"))
	close(g.gate)
	e.waitStatus(id, state.RunSucceeded)
}
