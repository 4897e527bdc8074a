package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// firings reads the nightly playbook's first trigger's
// runbook_schedule_firings_total{outcome} from /metrics.
func (e *env) firings(outcome string) float64 {
	e.t.Helper()
	v, _ := e.sample(`runbook_schedule_firings_total{outcome="` + outcome + `",playbook="nightly",trigger="0"}`)
	return v
}

// A schedule's overlap policy sees the previous slot's run executing on
// another replica: the replica leading the schedules is not the one that
// executes it (the leader that started it shut down, and the other
// replica took the run over). With skip the next slots are skipped; with
// replace the run is cancelled on the other replica, through the store.
func TestAScheduleSeesItsPreviousRunExecutingOnAnotherReplica(t *testing.T) {
	for _, overlap := range []string{"skip", "replace"} {
		t.Run("overlap "+overlap, func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.DB(t)
			open := func() *postgres.Store { return openPG(t, dsn) }
			dir := t.TempDir()
			fifo := filepath.Join(dir, "never")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			pbs := map[string]string{"nightly.yaml": fmt.Sprintf(`version: 1
name: nightly
triggers:
  - schedule: {cron: "* * * * * *", overlap: %s}
steps:
  - {id: work, uses: shell, with: {command: "read x < %s"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo finally >> %s"}}
`, overlap, fifo, filepath.Join(dir, "finally.txt"))}
			replica := func(process string, schedules bool) envOption {
				return func(o *server.Options) { o.Engine.Process, o.Schedules = process, schedules }
			}
			st := open()
			runsOf := func() []*state.Run {
				runs, err := st.ListRuns(ctx, state.RunFilter{Playbook: "nightly"})
				require.NoError(t, err)
				return runs
			}

			// B executes runs, A leads the schedules and starts the first.
			b := replicaOn(t, open(), pbs, replica("host/b", false))
			a := replicaOn(t, open(), pbs, replica("host/a", true))
			var first string
			require.Eventually(t, func() bool {
				runs := runsOf()
				if len(runs) > 0 && runs[len(runs)-1].Status == state.RunRunning {
					first = runs[len(runs)-1].ID
					return true
				}
				return false
			}, 10*time.Second, 10*time.Millisecond, "a slot starts a run on A")
			// A shuts down: B takes the run over; A comes back and leads.
			a.stop()
			require.Eventually(t, func() bool {
				r, err := st.GetRun(ctx, first)
				return err == nil && r.Status == state.RunRunning && r.Owner == "host/b"
			}, 10*time.Second, 10*time.Millisecond, "B takes the run over")
			for _, r := range runsOf() {
				if r.ID != first {
					require.True(t, r.Status.Done(), "only the first run is in flight: %s is %s", r.ID, r.Status)
				}
			}
			a2 := replicaOn(t, open(), pbs, replica("host/a2", true))

			if overlap == "skip" {
				require.Eventually(t, func() bool { return a2.firings("skipped") >= 2 }, 15*time.Second, 20*time.Millisecond,
					"the new leader skips the slots")
				var inFlight []string
				for _, r := range runsOf() {
					if !r.Status.Done() {
						inFlight = append(inFlight, r.ID)
					}
				}
				assert.Equal(t, []string{first}, inFlight, "no slot started a run beside it")
				r, err := st.GetRun(ctx, first)
				require.NoError(t, err)
				assert.Equal(t, state.RunRunning, r.Status)
				return
			}
			r := waitRun(t, st, first, state.RunCancelled)
			require.NotNil(t, r.Error)
			assert.Contains(t, r.Error.Message, "overlap: replace")
			require.Eventually(t, func() bool { return !b.srv.Engine().Executing(first) }, 10*time.Second, 10*time.Millisecond,
				"B stops executing it")
			require.Eventually(t, func() bool { return a2.firings("started") >= 1 }, 10*time.Second, 10*time.Millisecond,
				"the new leader starts the slot's run")
			evs, err := st.Events(ctx, first, 0, 0)
			require.NoError(t, err)
			var ends []string
			for _, ev := range evs {
				if ev.Step == "tidy" && ev.Type == "step.succeeded" {
					ends = append(ends, ev.Type)
				}
			}
			assert.Len(t, ends, 1, "B ran its finally step once")
		})
	}
}

// waitRun waits up to 15 s for run id to have status want in st.
func waitRun(t *testing.T, st state.Store, id string, want state.RunStatus) *state.Run {
	t.Helper()
	var r *state.Run
	require.Eventually(t, func() bool {
		var err error
		r, err = st.GetRun(context.Background(), id)
		return err == nil && r.Status == want
	}, 15*time.Second, 10*time.Millisecond, "run %s becomes %s", id, want)
	return r
}

// runbook_runs_unfinished counts the runs in flight in the whole database,
// whichever replica executes them, and only the replica leading the
// scheduler exports it, so a sum over the replicas counts each run once.
func TestTheLeaderExportsTheUnfinishedRunsOfTheWholeDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DB(t)
	open := func() *postgres.Store { return openPG(t, dsn) }
	other := open()
	// Runs of a third replica, alive (not taken over), and of the past.
	require.NoError(t, other.KeepReplica(ctx, "host/x", state.ReplicaServe, time.Hour))
	at := time.Now()
	for i, st := range []state.RunStatus{state.RunRunning, state.RunRunning, state.RunWaiting, state.RunSucceeded, state.RunCancelled} {
		require.NoError(t, other.CreateRun(ctx, &state.Run{ID: fmt.Sprintf("x%d", i), Playbook: "pb", Status: st, Owner: "host/x", CreatedAt: at}))
	}
	require.NoError(t, other.CreateRun(ctx, &state.Run{ID: "x0/child", ParentID: "x0", Playbook: "sub", Status: state.RunRunning, Owner: "host/x", CreatedAt: at}))

	leader := replicaOn(t, open(), nil, func(o *server.Options) { o.Engine.Process, o.Schedules = "host/a", true })
	follower := replicaOn(t, open(), nil, func(o *server.Options) { o.Engine.Process = "host/b" })
	require.Eventually(t, func() bool {
		v, ok := leader.sample(`runbook_runs_unfinished{status="running"}`)
		return ok && v == 2
	}, 15*time.Second, 20*time.Millisecond, "the leader exports the database's running runs")
	for status, want := range map[string]float64{"waiting": 1, "pending": 0, "suspended": 0} {
		v, ok := leader.sample(`runbook_runs_unfinished{status="` + status + `"}`)
		assert.True(t, ok && v == want, "%s: %v (exported: %v), want %v", status, v, ok, want)
	}
	_, ok := follower.sample(`runbook_runs_unfinished{status="running"}`)
	assert.False(t, ok, "a replica that does not lead exports none")
}
