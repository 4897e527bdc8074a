package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// processRun is an engine of a runbook run process (not a replica) on a
// fresh database, fencing its runs and keeping its process lease, and a
// run of a playbook whose first step waits for the file dir/go, then
// whose second step appends to dir/two.
type processRun struct {
	t       *testing.T
	dsn     string
	dir     string
	st      *postgres.Store
	e       *engine.Engine
	lease   *engine.ProcessLease
	started chan string // the IDs of the steps started
	run     *state.Run
	done    chan error
}

const laptop = "a-laptop/4242@100" // a process of another host: its lease decides

func newProcessRun(t *testing.T, ttl time.Duration) *processRun {
	t.Helper()
	ctx := context.Background()
	p := &processRun{t: t, dsn: pgtest.DB(t), dir: t.TempDir(), started: make(chan string, 16), done: make(chan error, 1)}
	st, err := postgres.Open(ctx, p.dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p.st = st
	p.e = engine.New(engine.Options{
		Store: st, Process: laptop, Environ: []string{},

		Host: engine.Host{Fence: true}, Observer: engine.Observer{Event: func(_ string, ev state.Event) {
			if ev.Type == "step.started" {
				p.started <- ev.Step
			}
		}},
	})
	p.lease = p.e.KeepProcessLease(ttl)
	t.Cleanup(p.lease.Stop)
	pb, err := playbook.Parse("pb.yaml", []byte(`version: 1
name: laptop
take_over: true
steps:
  - {id: one, uses: shell, with: {command: "while [ ! -e `+filepath.Join(p.dir, "go")+` ]; do sleep 0.02; done"}}
  - {id: two, uses: shell, with: {command: "echo two >> `+filepath.Join(p.dir, "two")+`"}}
`), playbook.LoadOptions{})
	require.NoError(t, err)
	p.run, err = p.e.Start(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	require.NoError(t, p.e.Claim(ctx, p.run.ID))
	go func() {
		_, err := p.e.Execute(ctx, pb, p.run)
		p.done <- err
	}()
	require.Equal(t, "one", p.next(), "the first step starts while the lease holds")
	return p
}

// next returns the ID of the next step started.
func (p *processRun) next() string {
	p.t.Helper()
	select {
	case id := <-p.started:
		return id
	case <-time.After(10 * time.Second):
		p.t.Fatal("no step started within 10s")
		return ""
	}
}

// blockRenewals holds the lease's row locked, so that the process's
// renewals hang (as on a network cut) without stopping the process; the
// returned func lets them through again.
func (p *processRun) blockRenewals() (unblock func()) {
	p.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.dsn)
	require.NoError(p.t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(p.t, err)
	var n int
	require.NoError(p.t, tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM runbook_leases WHERE name = $1 FOR UPDATE) l`, "process/"+laptop).Scan(&n))
	require.Equal(p.t, 1, n, "the process's lease row")
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

// until waits up to 20 s for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "not %s within 20s", what)
		time.Sleep(10 * time.Millisecond)
	}
}

// finishFirstStep lets step one end, and waits for its record.
func (p *processRun) finishFirstStep() {
	p.t.Helper()
	require.NoError(p.t, os.WriteFile(filepath.Join(p.dir, "go"), nil, 0o600))
	until(p.t, "step one recorded succeeded", func() bool {
		recs, err := p.st.Steps(context.Background(), p.run.ID)
		require.NoError(p.t, err)
		for _, r := range recs {
			if r.ID == "one" && r.Status == state.StepSucceeded {
				return true
			}
		}
		return false
	})
}

// noStepTwo checks that step two has not started (nor run).
func (p *processRun) noStepTwo(msg string) {
	p.t.Helper()
	select {
	case id := <-p.started:
		p.t.Fatalf("%s: step %s started", msg, id)
	case <-time.After(300 * time.Millisecond):
	}
	_, err := os.Stat(filepath.Join(p.dir, "two"))
	assert.True(p.t, errors.Is(err, os.ErrNotExist), "%s: step two ran", msg)
}

// A runbook run process whose lease cannot be renewed (its renewals hang)
// starts no further step once the lease lapsed by its own clock, and
// goes on once a renewal succeeds again and the run is still its own.
func TestAProcessWhoseLeaseLapsedStartsNoStepUntilItIsRenewed(t *testing.T) {
	p := newProcessRun(t, 1500*time.Millisecond)
	unblock := p.blockRenewals()
	until(t, "the lease lapsed", p.lease.Lapsed)
	p.finishFirstStep()
	p.noStepTwo("while the lease lapsed")

	unblock()
	require.Equal(t, "two", p.next(), "renewed, and still the run's owner: it goes on")
	require.NoError(t, <-p.done)
	r, err := p.st.GetRun(context.Background(), p.run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, r.Status)
	assert.Equal(t, laptop, r.Owner)
}

// Once its lease lapsed in the database, a replica takes the run over;
// when the process renews its lease again, it reads that the run is not
// its own any more and stops it before its next step (a shell step,
// which writes nothing before it runs), without writing.
func TestAProcessWhoseRunWasTakenOverWhileItsLeaseLapsedStopsAtTheRenewal(t *testing.T) {
	p := newProcessRun(t, 1500*time.Millisecond)
	ctx := context.Background()
	unblock := p.blockRenewals()
	until(t, "the lease lapsed", p.lease.Lapsed)
	p.finishFirstStep()
	until(t, "the lease expired in the database", func() bool {
		found, expired, err := p.st.LeaseExpired(ctx, "process/"+laptop)
		require.NoError(t, err)
		return found && expired
	})
	const replica = "replica-b/77@1"
	require.NoError(t, p.st.KeepReplica(ctx, replica, time.Minute))
	taken, err := p.st.ClaimRuns(ctx, replica, 10, 0, false)
	require.NoError(t, err)
	require.Equal(t, []string{p.run.ID}, taken, "take_over: true, and its process's lease lapsed")

	unblock()
	var fe *state.FencedError
	select {
	case err := <-p.done:
		require.ErrorAs(t, err, &fe)
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not stop within 20s of the renewal")
	}
	assert.Equal(t, replica, fe.Owner)
	p.noStepTwo("after the takeover")
	r, err := p.st.GetRun(ctx, p.run.ID)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, r.Status, "nothing written over it")
	recs, err := p.st.Steps(ctx, p.run.ID)
	require.NoError(t, err)
	for _, rec := range recs {
		assert.NotEqual(t, "two", rec.ID, "step two not recorded")
	}
}

// A process claims a run before it executes it: a new run, or a run it
// resumes whose process is gone. The claim is refused, naming the owner,
// when a live replica owns the run (it took it over first) or a live
// process does.
func TestAProcessClaimsARunOnlyFromNoLiveOwner(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	e := engine.New(engine.Options{Store: st, Process: laptop, Host: engine.Host{Fence: true}})
	lease := e.KeepProcessLease(time.Minute)
	defer lease.Stop()
	other := engine.New(engine.Options{Store: st, Process: "another-host/5@1"})
	otherLease := other.KeepProcessLease(time.Minute)
	defer otherLease.Stop()
	const liveReplica, deadReplica = "replica-live/1@1", "replica-dead/2@1"
	require.NoError(t, st.KeepReplica(ctx, liveReplica, time.Minute))
	require.NoError(t, st.KeepReplica(ctx, deadReplica, time.Millisecond))
	gone := "another-host/6@1"
	_, err = st.Lead(ctx, "process/"+gone, gone, 0, time.Millisecond)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // the short leases expired

	for _, c := range []struct {
		name, owner string
		claimed     bool
	}{
		{"a new run, owned by nobody", "", true},
		{"a run of a process whose lease lapsed", gone, true},
		{"a run of a replica whose lease expired", deadReplica, true},
		{"a run of a live replica", liveReplica, false},
		{"a run of a live process of another host", other.Process(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &state.Run{ID: "run-" + strings.ReplaceAll(c.name, " ", "-"), Playbook: "pb", Status: state.RunRunning, Owner: c.owner, CreatedAt: time.Now(), StartedAt: time.Now()}
			require.NoError(t, st.CreateRun(ctx, r))
			err := e.Claim(ctx, r.ID)
			// The fence says who owns it: a write of the laptop's passes
			// only once the run is its own.
			write := st.AppendEvents(state.WithFence(ctx, state.Fence{Owner: laptop, Run: r.ID}), r.ID,
				state.Event{Time: time.Now(), Type: "test", Message: "a fenced write"})
			if c.claimed {
				require.NoError(t, err)
				assert.NoError(t, write, "the laptop's run now")
				return
			}
			var fe *state.FencedError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, c.owner, fe.Owner)
			require.ErrorAs(t, write, &fe, "left to its owner")
			assert.Equal(t, c.owner, fe.Owner)
		})
	}
}
