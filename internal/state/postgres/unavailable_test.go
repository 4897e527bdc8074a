package postgres_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// The errors of a database that restarts or cuts the store's connections
// say that trying again cures them (state.ErrUnavailable), and trying
// again does once it answers; an error no retry cures does not say so.
func TestTheStoreSaysWhichErrorsARetryCures(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	run := &state.Run{ID: "r1", Playbook: "p", Status: state.RunRunning, CreatedAt: time.Now()}
	require.NoError(t, s.CreateRun(ctx, run))

	err := s.CreateRun(ctx, run)
	require.ErrorIs(t, err, state.ErrExists)
	assert.NotErrorIs(t, err, state.ErrUnavailable, "a run created twice")
	_, err = s.GetRun(ctx, "missing")
	assert.NotErrorIs(t, err, state.ErrUnavailable, "a run that does not exist")

	// While the server is down (and when it cuts the connections) every
	// read and write fails; each failure says a retry cures it.
	var (
		mu   sync.Mutex
		errs []error
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, gerr := s.GetRun(ctx, run.ID)
			serr := s.SaveSteps(ctx, []*state.StepRecord{{RunID: run.ID, ID: "a", Status: state.StepSucceeded}})
			_, _, lerr := s.AcquireLock(ctx, state.Lock{Key: "k", Owner: run.ID, Process: "p", Since: time.Now()})
			mu.Lock()
			for _, e := range []error{gerr, serr, lerr} {
				if e != nil {
					errs = append(errs, e)
				}
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	pgtest.Terminate(t)
	time.Sleep(50 * time.Millisecond)
	pgtest.Restart(t, 500*time.Millisecond)
	close(stop)
	<-done
	require.NotEmpty(t, errs, "no call failed while the server was down")
	for _, e := range errs {
		assert.ErrorIs(t, e, state.ErrUnavailable)
	}
	t.Logf("%d calls failed while the server restarted; the first: %v", len(errs), errs[0])

	got, err := s.GetRun(ctx, run.ID)
	require.NoError(t, err, "once the server answers again")
	assert.Equal(t, run.ID, got.ID)
	require.NoError(t, s.SaveSteps(ctx, []*state.StepRecord{{RunID: run.ID, ID: "a", Status: state.StepSucceeded}}))
}

// A renewal of a replica's lease that fails because the database served
// no one (stopped, restarting) says so (state.ErrNotServing): the
// replicas go on with their steps meanwhile. One that fails because its
// connection was terminated while the database served others does not.
func TestALeaseRenewalSaysWhenTheDatabaseServedNoOne(t *testing.T) {
	s := open(t, pgtest.DB(t), postgres.Options{})
	require.NoError(t, s.KeepReplica(ctx, "renew/1", state.ReplicaServe, time.Minute))
	var (
		phase   atomic.Int32 // 0: serving; 1: connections terminated; 2: restarting
		mu      sync.Mutex
		serving []error // failed while the database served
		down    []error // failed while it restarted
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := s.KeepReplica(ctx, "renew/1", state.ReplicaServe, time.Minute)
			p := phase.Load()
			mu.Lock()
			switch {
			case err == nil:
			case p == 2:
				down = append(down, err)
			default:
				serving = append(serving, err)
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	phase.Store(1)
	pgtest.Terminate(t)
	time.Sleep(200 * time.Millisecond)
	phase.Store(2)
	pgtest.Restart(t, 500*time.Millisecond)
	close(stop)
	<-done
	require.NotEmpty(t, serving, "no renewal failed on its terminated connection")
	for _, err := range serving {
		assert.ErrorIs(t, err, state.ErrUnavailable)
		assert.NotErrorIs(t, err, state.ErrNotServing, "the database served the others")
	}
	var refused int
	for _, err := range down {
		assert.ErrorIs(t, err, state.ErrUnavailable)
		if errors.Is(err, state.ErrNotServing) {
			refused++
		}
	}
	assert.NotZero(t, refused, "no renewal said the database served no one, of %d that failed while it restarted", len(down))
	t.Logf("%d renewals failed while the database served, %d while it restarted (%d: it served no one)", len(serving), len(down), refused)
}
