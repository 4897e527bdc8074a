package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// laptop is a runbook run process of another host: its lease decides.
const laptop = "a-laptop/4242@100"

// runProcess is the run host of a runbook run process (Embedded) on a
// fresh database, with lease lease, executing a run of a playbook whose
// first step waits for the file dir/go, then whose second step appends
// to dir/two.
type runProcess struct {
	t     *testing.T
	stops leaseStops
	dsn   string
	dir   string
	st    *postgres.Store
	h     *Host
	run   *state.Run
	mu    sync.Mutex
	steps []started // the steps started, in order
}

type started struct {
	id string
	at time.Time
}

func newRunProcess(t *testing.T, lease time.Duration) *runProcess {
	t.Helper()
	ctx := context.Background()
	p := &runProcess{t: t, dsn: pgtest.DB(t), dir: t.TempDir()}
	st, err := postgres.Open(ctx, p.dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p.st = st
	p.h = New(Options{Embedded: true, Lease: lease, Metrics: &p.stops, Engine: engine.Options{
		Store: st, Process: laptop, Environ: []string{},
		Observer: engine.Observer{Event: func(_ string, ev state.Event) {
			if ev.Type == "step.started" {
				p.mu.Lock()
				p.steps = append(p.steps, started{ev.Step, time.Now()})
				p.mu.Unlock()
			}
		}},
	}})
	require.NoError(t, p.h.Open(ctx))
	t.Cleanup(p.h.Close)
	pb, err := playbook.Parse("pb.yaml", []byte(`version: 1
name: laptop
take_over: true
steps:
  - {id: one, uses: shell, with: {command: "while [ ! -e `+filepath.Join(p.dir, "go")+` ]; do sleep 0.02; done"}}
  - {id: two, uses: shell, with: {command: "echo two >> `+filepath.Join(p.dir, "two")+`"}}
`), playbook.LoadOptions{})
	require.NoError(t, err)
	p.run, err = p.h.Execute(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	until(t, "step one started while the lease holds", func() bool { return len(p.started()) > 0 })
	return p
}

// leaseStops counts the runs stopped because the lease lapsed.
type leaseStops struct {
	nopMetrics
	n atomic.Int32
}

func (m *leaseStops) Fenced(why string) {
	if why == "lease" {
		m.n.Add(1)
	}
}

// started returns the steps started so far.
func (p *runProcess) started() []started {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]started(nil), p.steps...)
}

// blockRenewals holds the replica's row locked, so that the process's
// renewals hang (as on a network cut) without stopping the process; the
// returned func lets them through again.
func (p *runProcess) blockRenewals() (unblock func()) {
	p.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(p.t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(p.t, err)
	var kind string
	require.NoError(p.t, tx.QueryRow(ctx, `SELECT kind FROM runbook_replicas WHERE id = $1 FOR UPDATE`, laptop).Scan(&kind))
	require.Equal(p.t, "run", kind, "the process is a replica of kind run")
	var once sync.Once
	unblock = func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		})
	}
	p.t.Cleanup(unblock)
	return unblock
}

// twoFile is what step two appended (empty: it never ran).
func (p *runProcess) twoFile() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "two"))
	return string(b)
}

// until waits up to 30 s for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "not %s within 30s", what)
		time.Sleep(10 * time.Millisecond)
	}
}

// A runbook run process commits its run as its own (Execute): the record
// committed names the process its owner, so no claim follows the commit,
// and a replica that looks at the run sees it held from the start.
func TestARunProcessCommitsItsRunAsItsOwn(t *testing.T) {
	p := newRunProcess(t, time.Minute)
	assert.Equal(t, laptop, p.run.Owner, "the record as committed")
	other, err := postgres.Open(context.Background(), p.dsn, postgres.Options{})
	require.NoError(t, err)
	defer other.Close()
	r, err := other.GetRun(context.Background(), p.run.ID)
	require.NoError(t, err)
	assert.Equal(t, laptop, r.Owner)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o644))
	done, err := p.h.Await(context.Background(), p.run.ID, false)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, done.Status)
}

// A runbook run process is a replica of kind run with the replicas'
// lease: when its renewals hang it starts no further step once the lease
// lapsed by its own clock, and goes on once a renewal succeeds again and
// the run is still its own; step two runs once, after the renewal.
func TestARunProcessWhoseLeaseLapsedStartsNoStepUntilItIsRenewed(t *testing.T) {
	p := newRunProcess(t, 2*time.Second)
	unblock := p.blockRenewals()
	until(t, "the lease lapsed", p.h.LeaseLapsed)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o600))
	// Past the database's expiry of the lease (a lease and a half): the
	// process stopped its step by then, and started none.
	time.Sleep(3 * time.Second)
	assert.Empty(t, p.twoFile(), "step two ran while the lease lapsed")
	renewedAt := time.Now()
	unblock()

	r, err := p.h.Await(context.Background(), p.run.ID, true)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status, "renewed, and still the run's owner: it goes on")
	assert.Equal(t, laptop, r.Owner)
	assert.Equal(t, "two\n", p.twoFile(), "step two ran once")
	for _, s := range p.started() {
		if s.id == "two" {
			assert.True(t, s.at.After(renewedAt), "step two started before the lease was renewed")
		}
	}
}

// Once its lease expired in the database, a serve replica takes the run
// over (take_over: true); when the process renews its lease, it finds the
// run is not its own any more and gives it up without starting step two
// or writing anything, and says which replica has it.
func TestARunProcessWhoseRunWasTakenOverWhileItsLeaseLapsedStopsAtTheRenewal(t *testing.T) {
	p := newRunProcess(t, 2*time.Second)
	ctx := context.Background()
	unblock := p.blockRenewals()
	until(t, "the lease lapsed", p.h.LeaseLapsed)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o600))
	until(t, "the lease expired in the database", func() bool {
		kind, expired, err := p.st.Replica(ctx, laptop)
		require.NoError(t, err)
		return kind == state.ReplicaRun && expired
	})
	const replica = "replica-b/77@1"
	require.NoError(t, p.st.KeepReplica(ctx, replica, state.ReplicaServe, time.Minute))
	taken, err := p.st.ClaimRuns(ctx, replica, 10, 0, false)
	require.NoError(t, err)
	require.Equal(t, []string{p.run.ID}, taken, "take_over: true, and its process's lease expired")

	unblock()
	awaited := make(chan error, 1)
	go func() {
		_, err := p.h.Await(ctx, p.run.ID, true)
		awaited <- err
	}()
	var fe *state.FencedError
	select {
	case err := <-awaited:
		require.ErrorAs(t, err, &fe)
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop within 30s of the renewal")
	}
	assert.Equal(t, replica, fe.Owner)
	assert.True(t, p.h.LeaseLapsed())
	assert.Empty(t, p.twoFile(), "step two ran after the takeover")
	r, err := p.st.GetRun(ctx, p.run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, r.Status, "nothing written over it")
	recs, err := p.st.Steps(ctx, p.run.ID)
	require.NoError(t, err)
	for _, rec := range recs {
		assert.NotEqual(t, "two", rec.ID, "step two not recorded")
	}
}

// Cancelled (Ctrl-C) while its lease lapsed and its run stopped for it, a
// runbook run process does not wait for a renewal that may not come (a
// network cut): it gives the run up at once, says why, and writes
// nothing; the run stays as last recorded, to resume.
func TestARunProcessCancelledWhileItsLeaseLapsedStopsWaiting(t *testing.T) {
	p := newRunProcess(t, 2*time.Second)
	p.blockRenewals()
	until(t, "the run stopped for the lease", func() bool { return p.stops.n.Load() > 0 })
	until(t, "the cancel reached the run waiting for its lease", func() bool { return p.h.CancelRun(p.run.ID, errors.New("interrupt")) })

	awaited := make(chan error, 1)
	go func() {
		_, err := p.h.Await(context.Background(), p.run.ID, true)
		awaited <- err
	}()
	select {
	case err := <-awaited:
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), "interrupt") && strings.Contains(err.Error(), "could not renew its lease"), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for the lease 10s after the cancel")
	}
	r, err := p.st.GetRun(context.Background(), p.run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, r.Status, "nothing written")
	assert.Empty(t, p.twoFile())
}
