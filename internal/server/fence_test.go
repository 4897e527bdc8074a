package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// cutOff is a replica's store whose lease renewals fail while cut is set,
// as when the replica is cut off from the database (its other writes go
// through: the replica does not know it is cut off until its lease says
// so).
// fails, when set, fails that many renewals, as connections the database
// cut do.
type cutOff struct {
	*postgres.Store
	cut   atomic.Bool
	fails atomic.Int32
}

func (c *cutOff) KeepReplica(ctx context.Context, replica string, kind state.ReplicaKind, ttl time.Duration) error {
	if c.cut.Load() {
		return errors.New("cut off from the database (test)")
	}
	if c.fails.Add(-1) >= 0 {
		return errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01) (test)")
	}
	return c.Store.KeepReplica(ctx, replica, kind, ttl)
}

// fenceLease is the replicas' lease in these tests: short, so that a
// takeover comes quickly.
const fenceLease = 2 * time.Second

// pgReplica starts a `runbook serve` replica named process over st (a
// store on the database the test shares) and the playbooks in dir.
func pgReplica(t *testing.T, dir, process string, st state.Store) *env {
	t.Helper()
	o := server.Options{
		Engine:    engine.Options{Store: st, Environ: os.Environ(), Process: process},
		Playbooks: dir, Listen: "127.0.0.1:0", Token: token,
		ShutdownGrace: 5 * time.Second, Lease: fenceLease,
	}
	// A replica that stopped its runs may end with their error: only its
	// stopping in time matters here.
	return serveEnv(t, o, func(runErr error) {
		if errors.Is(runErr, errServerHung) {
			t.Error(runErr)
		}
	})
}

// chainPlaybook is a chain of shell steps, each appending its name to
// out once it is done; step two first writes gate+".waiting" and waits
// for the file gate.
func chainPlaybook(out, gate string) string {
	return fmt.Sprintf(`version: 1
name: chain
steps:
  - id: one
    uses: shell
    with: {command: "echo one >> %[1]s"}
  - id: two
    uses: shell
    with: {command: "touch %[2]s.waiting; while [ ! -e %[2]s ]; do sleep 0.02; done; echo two >> %[1]s"}
  - id: three
    uses: shell
    with: {command: "echo three >> %[1]s"}
  - id: four
    uses: shell
    with: {command: "echo four >> %[1]s"}
`, out, gate)
}

// linesOf returns the lines of file.
func linesOf(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	return strings.Fields(string(b))
}

func ownerOf(t *testing.T, st state.Store, id string) *state.Run {
	t.Helper()
	r, err := st.GetRun(context.Background(), id)
	require.NoError(t, err)
	return r
}

// waitFor polls cond until it holds (10 s at most).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A replica cut off from the database (its lease renewals fail) stops
// executing its run before its lease expires, writing nothing; the other
// replica takes the run over once the lease expired and completes it, and
// each shell step ran once. Once its renewals succeed again, the cut-off
// replica executes runs again.
func TestAReplicaCutOffStopsItsRunsBeforeAnotherTakesThem(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	out, gate := filepath.Join(files, "out"), filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainPlaybook(out, gate)), 0o600))
	open := func() *postgres.Store { return openPG(t, dsn) }
	stA := &cutOff{Store: open()}
	stB := open()
	a := pgReplica(t, dir, "fence-a/1", stA)
	b := pgReplica(t, dir, "fence-b/2", stB)

	r := a.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	waitFor(t, "step two waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })
	require.Equal(t, "fence-a/1", ownerOf(t, stB, id).Owner)

	stA.cut.Store(true)
	waitFor(t, "replica A stops executing the run", func() bool { return !a.srv.Engine().Executing(id) })
	// A stopped before its lease expired: no other replica may take the
	// run yet, and A wrote nothing when it stopped.
	taken, err := stB.ClaimRun(context.Background(), id, "probe/3", false)
	require.NoError(t, err)
	require.False(t, taken, "replica A stopped its run only after its lease expired")
	run := ownerOf(t, stB, id)
	assert.Equal(t, "fence-a/1", run.Owner)
	assert.Equal(t, state.RunRunning, run.Status)

	waitFor(t, "replica B takes the run over", func() bool { return ownerOf(t, stB, id).Owner == "fence-b/2" })
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	b.waitStatus(id, state.RunSucceeded)
	assert.Equal(t, []string{"one", "two", "three", "four"}, linesOf(t, out), "each step ran once")
	assert.Equal(t, float64(1), a.metric(`runbook_runs_fenced_total{reason="lease"}`))

	// Renewed, A executes runs again.
	stA.cut.Store(false)
	db, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer db.Close(context.Background())
	waitFor(t, "replica A renews its lease", func() bool {
		var live bool
		require.NoError(t, db.QueryRow(context.Background(), `SELECT expires_at > now() FROM runbook_replicas WHERE id = 'fence-a/1'`).Scan(&live))
		return live
	})
	r = a.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	again := r.json(t)["id"].(string)
	a.waitStatus(again, state.RunSucceeded)
	assert.Equal(t, "fence-a/1", ownerOf(t, stB, again).Owner)
}

// Two renewals in a row that fail on connections the database cut (its
// backends terminated) do not lapse the lease: a failed renewal is tried
// again at once, not a third of a lease later, and the run goes on.
func TestTwoFailedRenewalsDoNotLapseTheLease(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	out, gate := filepath.Join(files, "out"), filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainPlaybook(out, gate)), 0o600))
	st := &cutOff{Store: openPG(t, dsn)}
	a := pgReplica(t, dir, "blink-a/1", st)
	r := a.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	waitFor(t, "step two waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })

	st.fails.Store(2)
	waitFor(t, "two renewals fail, then one succeeds", func() bool { return st.fails.Load() < 0 })
	time.Sleep(fenceLease) // past the lapse the failures would have caused
	assert.Zero(t, a.metric(`runbook_runs_fenced_total{reason="lease"}`), "the lease lapsed")
	require.True(t, a.srv.Engine().Executing(id), "the run goes on")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	a.waitStatus(id, state.RunSucceeded)
	assert.Equal(t, []string{"one", "two", "three", "four"}, linesOf(t, out), "each step ran once")
}

// A database that cut every replica off at once (down, restarted, its
// connections terminated) let every lease in it expire meanwhile. The
// first replica back takes no run of another that renews a moment later:
// the run goes on where it executed, and each of its steps ran once.
func TestAReplicaBackFromAnOutageTakesNoRunOfAnotherThatRenews(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	out, gate := filepath.Join(files, "out"), filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainPlaybook(out, gate)), 0o600))
	stA, stB := &cutOff{Store: openPG(t, dsn)}, &cutOff{Store: openPG(t, dsn)}
	a := pgReplica(t, dir, "outage-a/1", stA)
	b := pgReplica(t, dir, "outage-b/2", stB)
	r := b.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	waitFor(t, "step two waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })

	db, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer db.Close(context.Background())
	stA.cut.Store(true)
	stB.cut.Store(true)
	waitFor(t, "both leases expire in the database", func() bool {
		var live int
		require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM runbook_replicas WHERE expires_at > now()`).Scan(&live))
		return live == 0
	})
	require.False(t, b.srv.Engine().Executing(id), "B stopped its run when its lease lapsed")

	stA.cut.Store(false) // A is back first, and polls the queue meanwhile
	time.Sleep(fenceLease * 3 / 4)
	stB.cut.Store(false)
	waitFor(t, "B executes its run again, or A takes it", func() bool {
		return b.srv.Engine().Executing(id) || ownerOf(t, stB, id).Owner != "outage-b/2"
	})
	require.Equal(t, "outage-b/2", ownerOf(t, stB, id).Owner, "A, back first, took the run of B, which renewed its lease a moment later")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	b.waitStatus(id, state.RunSucceeded)
	assert.Equal(t, "outage-b/2", ownerOf(t, stB, id).Owner, "the run stayed B's")
	taken, _ := a.sample(`runbook_runs_recovered_total{reason="taken"}`)
	assert.Zero(t, taken, "A took no run")
	assert.Equal(t, []string{"one", "two", "three", "four"}, linesOf(t, out), "each step ran once")
}

// A database restarted for longer than the replicas' leases hold stops
// no step: while it refuses every connection no other replica can take a
// run, and once it is back none does before the replicas alive renewed.
// The step executing during the outage goes on, the run's other steps
// wait for the lease and follow, each ran once, and nothing was fenced.
// (A replica cut off from a database that serves the others stops its
// steps: TestAReplicaCutOffStopsItsRunsBeforeAnotherTakesThem.)
func TestADatabaseRestartStopsNoExecutingStep(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	out, gate := filepath.Join(files, "out"), filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainPlaybook(out, gate)), 0o600))
	a := pgReplica(t, dir, "restart-a/1", openPG(t, dsn))
	b := pgReplica(t, dir, "restart-b/2", openPG(t, dsn))
	r := a.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	waitFor(t, "step two waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })

	down := 2 * fenceLease // past the lease, its grace and their valid window
	restarted := make(chan time.Time, 1)
	go func() { restarted <- pgtest.Restart(t, down) }()
	time.Sleep(fenceLease) // the database is down, and the lease lapsed
	assert.True(t, a.srv.Engine().Executing(id), "the run goes on while the database is down")
	require.NoError(t, os.WriteFile(gate, nil, 0o600)) // step two ends during the outage
	back := <-restarted
	a.waitStatus(id, state.RunSucceeded)
	t.Logf("run succeeded %s after the database answered again", time.Since(back).Round(time.Millisecond))
	assert.Equal(t, []string{"one", "two", "three", "four"}, linesOf(t, out), "each step ran once")
	assert.Equal(t, "restart-a/1", ownerOf(t, openPG(t, dsn), id).Owner, "the run stayed A's")
	for _, e := range []*env{a, b} {
		fenced, _ := e.sample(`runbook_runs_fenced_total{reason="lease"}`)
		assert.Zero(t, fenced, "a run was stopped for a lapsed lease")
	}
}

// A replica whose write is refused because another process owns its run
// now (it was paused past its lease, say) stops the run at once: no
// further step runs, nothing of its is written over the new owner's
// record, the refusal is counted and the run is forgotten, not executed
// again.
func TestAReplicaWhoseWriteIsRefusedStopsTheRunAtOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	out, gate := filepath.Join(files, "out"), filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainPlaybook(out, gate)), 0o600))
	st := openPG(t, dsn)
	other := openPG(t, dsn)
	a := pgReplica(t, dir, "fence-a/1", st)

	r := a.api("POST", "/api/v1/playbooks/chain/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)
	waitFor(t, "step two waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })

	// Another process takes the run over (as a replica does once A's
	// lease expired) and records it.
	run := ownerOf(t, other, id)
	run.Owner, run.Inputs = "elsewhere/9", map[string]any{"taken": true}
	require.NoError(t, other.SaveRun(context.Background(), run, state.Event{Type: "run.resumed"}))
	require.NoError(t, os.WriteFile(gate, nil, 0o600))

	waitFor(t, "replica A stops executing the run", func() bool { return !a.srv.Engine().Executing(id) })
	assert.Equal(t, []string{"one", "two"}, linesOf(t, out), "no step after the refused write ran")
	waitFor(t, "the refusal is counted", func() bool { v, _ := a.sample(`runbook_runs_fenced_total{reason="refused"}`); return v == 1 })
	assert.Equal(t, float64(0), a.metric(`runbook_runs_recovered_total{reason="returned"}`), "a fenced run is not executed again")
	got := ownerOf(t, other, id)
	assert.Equal(t, "elsewhere/9", got.Owner)
	assert.Equal(t, state.RunRunning, got.Status)
	assert.Equal(t, map[string]any{"taken": true}, got.Inputs)
	steps, err := other.Steps(context.Background(), id)
	require.NoError(t, err)
	statuses := map[string]state.StepStatus{}
	for _, s := range steps {
		statuses[s.ID] = s.Status
	}
	// Step two's start was on record before the takeover (a running step
	// is a record); its end, and step three's start with it, were refused.
	assert.Equal(t, map[string]state.StepStatus{"one": state.StepSucceeded, "two": state.StepRunning}, statuses, "step two's end was not written")
}
