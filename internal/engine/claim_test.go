package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// laptop is a process of another host: its replica lease decides.
const laptop = "a-laptop/4242@100"

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
	require.NoError(t, st.KeepReplica(ctx, laptop, state.ReplicaRun, time.Minute))
	const liveReplica, deadReplica, other, gone = "replica-live/1@1", "replica-dead/2@1", "another-host/5@1", "another-host/6@1"
	require.NoError(t, st.KeepReplica(ctx, liveReplica, state.ReplicaServe, time.Minute))
	require.NoError(t, st.KeepReplica(ctx, deadReplica, state.ReplicaServe, time.Millisecond))
	require.NoError(t, st.KeepReplica(ctx, other, state.ReplicaRun, time.Minute))
	require.NoError(t, st.KeepReplica(ctx, gone, state.ReplicaRun, time.Millisecond))
	time.Sleep(20 * time.Millisecond) // the short leases expired

	for _, c := range []struct {
		name, owner string
		claimed     bool
	}{
		{"a new run, owned by nobody", "", true},
		{"a run of a process whose lease lapsed", gone, true},
		{"a run of a replica whose lease expired", deadReplica, true},
		{"a run of a live replica", liveReplica, false},
		{"a run of a live process of another host", other, false},
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

// until waits up to 20 s for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "not %s within 20s", what)
		time.Sleep(10 * time.Millisecond)
	}
}
