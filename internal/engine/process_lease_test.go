package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// On a database shared with other hosts, a runbook run process keeps a
// lease while it executes: once the lease lapses (the process died, its
// host with it), the runs it owns are shown interrupted wherever they are
// looked at; while it is renewed, they are shown running.
func TestARunOfAProcessOfAnotherHostIsInterruptedOnceItsLeaseLapses(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	owner := func(name string) *engine.Engine {
		return engine.New(engine.Options{Store: st, Process: "another-host/" + name})
	}
	run := func(id, o string) *state.Run {
		return &state.Run{ID: id, Playbook: "pb", Status: state.RunRunning, Owner: o, StartedAt: time.Now()}
	}

	alive := owner("4242@100")
	stopAlive := alive.KeepProcessLease(time.Second).Stop
	defer stopAlive()
	dead := owner("4343@100")
	dead.KeepProcessLease(time.Second).Stop() // it ends: as a process that exits
	// A process killed with its host: its lease is never renewed again.
	killed := "another-host/4444@100"
	term, err := st.Lead(ctx, "process/"+killed, killed, 0, 300*time.Millisecond)
	require.NoError(t, err)
	require.NotZero(t, term)
	time.Sleep(time.Second)

	assert.False(t, engine.Interrupted(st, run("a", alive.Process()), nil), "a process renewing its lease")
	assert.True(t, engine.Interrupted(st, run("b", dead.Process()), nil), "a process that ended its lease")
	assert.False(t, engine.Interrupted(st, run("c", "another-host/4545@100"), nil), "a process that kept no lease cannot be told")

	assert.True(t, engine.Interrupted(st, run("d", killed), nil), "a process whose lease lapsed")
}
