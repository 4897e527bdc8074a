package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// scheduleLeader returns the index of the replica whose scheduler holds
// the leader lease, once one does.
func scheduleLeader(t *testing.T, db *pgx.Conn, rs *replicaSet) int {
	t.Helper()
	leader := -1
	waitFor(t, 20*time.Second, "a replica leads the scheduler", func() bool {
		var holder string
		if db.QueryRow(context.Background(), `SELECT holder FROM runbook_leases WHERE name = 'scheduler' AND expires_at > now()`).Scan(&holder) != nil {
			return false
		}
		for i := range rs.proc {
			if sameOwner(rs.owner(i), holder) {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// The schedule controls across two replicas on PostgreSQL: a pause made
// through the replica that does not lead is seen by the leader, which
// skips each slot (shown skipped with the reason through either replica);
// two backfills of the same range at once, one through each replica,
// start each slot once; run now through the other replica starts one run
// with the trigger's inputs; a resume written to the database by the CLI
// lets the leader fire again; the audit log has each action with who and
// why.
func TestScheduleControlsAcrossTwoReplicas(t *testing.T) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/tick.yaml", everySecondPlaybook)
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s}\n", replicaLease))
	secret := c.operatorToken(t)
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks")}, proc: make([]*serveProc, 2), host: host}
	rs.start(0)
	rs.start(1)
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	admin := append([]string(nil), c.env...)
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)

	leader := scheduleLeader(t, db, rs)
	other := 1 - leader
	viaOther := []string{"--server", rs.url(other)}
	tickRuns := func() []*state.Run {
		runs, err := st.ListRuns(context.Background(), state.RunFilter{Playbook: "tick"})
		require.NoError(t, err)
		return runs
	}
	scheduledSlots := func() []string {
		var slots []string
		for _, r := range tickRuns() {
			if r.Trigger["via"] == nil {
				slots = append(slots, r.Trigger["slot"].(string))
			}
		}
		return slots
	}
	scheduledRuns := func() int { return len(scheduledSlots()) }
	waitFor(t, 15*time.Second, "the leader fires tick", func() bool { return scheduledRuns() >= 2 })

	r := c.run(append([]string{"schedule", "pause", "tick", "--reason", "change freeze"}, viaOther...)...)
	require.Equal(t, 0, r.code, r)
	var sc api.Schedule
	waitFor(t, 20*time.Second, "the leader skips three slots for the pause made on the other replica", func() bool {
		sc = c.schedule(t, "--server", rs.url(leader))
		return len(pausedSlots(sc)) >= 3
	})
	for _, slot := range scheduledSlots() {
		// A slot that fired as the pause was written came before it.
		assert.Less(t, slot, pausedSlots(sc)[0].Slot, "the leader starts no slot while paused")
	}
	assert.Equal(t, leader, scheduleLeader(t, db, rs), "the same replica led throughout")
	for _, sl := range pausedSlots(c.schedule(t, viaOther...)) {
		assert.Equal(t, "paused by alice: change freeze", sl.Paused, "shown through the other replica too")
	}

	// Two backfills of the paused slots at once, one through each replica.
	paused := pausedSlots(sc)
	from, to := paused[0].Slot, paused[len(paused)-1].Slot
	var wg sync.WaitGroup
	outs := make([]result, 2)
	for i := range 2 {
		wg.Go(func() {
			outs[i] = c.run("schedule", "backfill", "tick", "--from", from, "--to", to, "--server", rs.url(i), "--output", "json")
		})
	}
	wg.Wait()
	started := 0
	for _, out := range outs {
		require.Equal(t, 0, out.code, out)
		var ans api.BackfillAnswer
		require.NoError(t, json.Unmarshal([]byte(out.stdout), &ans))
		assert.Len(t, ans.Slots, len(paused))
		started += ans.Started
	}
	assert.Equal(t, len(paused), started, "the two backfills started each slot once between them")
	bySlot := map[string]int{}
	for _, run := range tickRuns() {
		if run.Trigger["via"] == "backfill" {
			bySlot[run.Trigger["slot"].(string)]++
		}
	}
	assert.Len(t, bySlot, len(paused))
	for slot, k := range bySlot {
		assert.Equal(t, 1, k, "slot %s has one run", slot)
	}

	r = c.run(append([]string{"schedule", "run", "tick"}, viaOther...)...)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	run := waitStatus(t, st, id, state.RunSucceeded, 20*time.Second)
	assert.Equal(t, "alice", run.StartedBy())
	assert.Equal(t, run.Trigger["slot"], run.Inputs["slot"])

	// The resume goes to the database directly (no --server: the CLI on a
	// shared state writes it), as another process's pause would.
	r = c.run("schedule", "resume", "tick", "--reason", "freeze over")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "resumed every schedule trigger of tick (paused by alice since")
	resumed := scheduledRuns()
	waitFor(t, 20*time.Second, "the leader fires again after the resume on the other replica", func() bool { return scheduledRuns() >= resumed+2 })

	c.env = admin
	r = c.run("audit", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var recs []state.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	actions := map[string]int{}
	for _, rec := range recs {
		if strings.HasPrefix(rec.Action, "schedule.") && rec.Identity == "alice" && rec.Result == "ok" {
			actions[rec.Action]++
			if rec.Action == "schedule.pause" {
				assert.Equal(t, "change freeze", rec.Detail["reason"])
			}
		}
	}
	assert.Equal(t, map[string]int{"schedule.pause": 1, "schedule.backfill": 2, "schedule.run": 1}, actions)
	resumes := 0
	for _, rec := range recs {
		if rec.Action == "schedule.resume" {
			resumes++
			assert.Equal(t, "local:tester", rec.Identity, "a change made on the state directly is audited as its local user")
			assert.Equal(t, "freeze over", rec.Detail["reason"])
		}
	}
	assert.Equal(t, 1, resumes)
}
