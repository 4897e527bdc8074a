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

// On a database shared with other hosts, a runbook run process is a
// replica of kind run while it executes: once its lease expired (the
// process died, its host with it), the runs it owns are shown
// interrupted wherever they are looked at; while it is renewed, they are
// shown running. A serve replica's run is never shown interrupted: the
// other replicas take it over.
func TestARunOfAProcessOfAnotherHostIsInterruptedOnceItsLeaseLapses(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DB(t), postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	run := func(id, o string) *state.Run {
		return &state.Run{ID: id, Playbook: "pb", Status: state.RunRunning, Owner: o, StartedAt: time.Now()}
	}

	const alive, dead, killed, server = "another-host/4242@100", "another-host/4343@100", "another-host/4444@100", "another-host/4545@100"
	require.NoError(t, st.KeepReplica(ctx, alive, state.ReplicaRun, time.Minute))
	require.NoError(t, st.KeepReplica(ctx, dead, state.ReplicaRun, time.Minute))
	require.NoError(t, st.DropReplica(ctx, dead)) // it leaves: as a process that exits
	// A process killed with its host: its lease is never renewed again.
	require.NoError(t, st.KeepReplica(ctx, killed, state.ReplicaRun, 300*time.Millisecond))
	require.NoError(t, st.KeepReplica(ctx, server, state.ReplicaServe, 300*time.Millisecond))
	time.Sleep(time.Second)

	assert.False(t, engine.Interrupted(st, run("a", alive), nil), "a process renewing its lease")
	assert.True(t, engine.Interrupted(st, run("b", dead), nil), "a process that ended its lease")
	assert.False(t, engine.Interrupted(st, run("c", "another-host/4646@100"), nil), "a process that never was a replica cannot be told")
	assert.True(t, engine.Interrupted(st, run("d", killed), nil), "a process whose lease expired")
	assert.False(t, engine.Interrupted(st, run("e", server), nil), "a serve replica's run is taken over, not interrupted")
}
