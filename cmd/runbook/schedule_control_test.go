package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// everySecondPlaybook fires every second (catchup: latest) and passes its slot
// as an input: a schedule whose slots a test sees within seconds.
const everySecondPlaybook = `version: 1
name: tick
inputs:
  slot: {type: string, required: true}
triggers:
  - schedule: {cron: "* * * * * *", catchup: latest}
    inputs: {slot: "${{ trigger.slot }}"}
steps:
  - {id: say, uses: log, with: {message: "slot ${{ inputs.slot }}"}}
`

// operatorToken creates the operator token alice on the state nobody
// serves yet and returns its secret.
func (c *cli) operatorToken(t *testing.T) string {
	t.Helper()
	r := c.run("token", "create", "alice", "--role", "operator")
	require.Equal(t, 0, r.code, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	return lines[len(lines)-1]
}

// tickRuns lists the runs of tick through a server's API, newest first.
func tickRuns(t *testing.T, s *serveProc) []api.Run {
	t.Helper()
	code, m := s.api(t, "GET", "/api/v1/runs?playbook=tick&limit=1000", nil)
	require.Equal(t, 200, code, m)
	b, _ := json.Marshal(m)
	var l api.RunList
	require.NoError(t, json.Unmarshal(b, &l))
	return l.Runs
}

// scheduled keeps the runs the scheduler itself started (not run now, not
// a backfill) and returns their slots.
func scheduled(runs []api.Run) []string {
	var out []string
	for _, r := range runs {
		if r.Trigger["via"] == nil {
			out = append(out, r.Trigger["slot"].(string))
		}
	}
	return out
}

// schedule reads `runbook schedule status tick --output json`.
func (c *cli) schedule(t *testing.T, args ...string) api.Schedule {
	t.Helper()
	r := c.run(append([]string{"schedule", "status", "tick", "--output", "json"}, args...)...)
	require.Equal(t, 0, r.code, r)
	var l api.ScheduleList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
	require.Len(t, l.Schedules, 1, r.stdout)
	return l.Schedules[0]
}

// pausedSlots lists the recent slots a pause kept from firing, oldest first.
func pausedSlots(sc api.Schedule) []api.Slot {
	var out []api.Slot
	for i := len(sc.Recent) - 1; i >= 0; i-- {
		if sc.Recent[i].Paused != "" {
			out = append(out, sc.Recent[i])
		}
	}
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		require.True(t, time.Now().Before(deadline), "within %s: %s", within, what)
		time.Sleep(100 * time.Millisecond)
	}
}

// The schedule controls through the real binary on one runbook serve
// over a state file: a pause (an operator's, with its reason) skips each
// slot and shows it skipped with the reason; run now starts a run with
// the inputs the trigger sets, recorded as alice's; a backfill of the
// paused slots (dry, bounded, then real, then again) starts each once;
// the resume lets the schedule fire again; the audit log has each action
// with who and why.
func TestScheduleControlsThroughTheBinary(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/tick.yaml", everySecondPlaybook)
	secret := c.operatorToken(t)
	s := c.serveRuns(t)
	admin := append([]string(nil), c.env...)
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+secret)

	waitFor(t, 15*time.Second, "the scheduler fires tick", func() bool { return len(scheduled(tickRuns(t, s))) >= 2 })

	r := c.run("schedule", "pause", "tick")
	assert.Equal(t, 2, r.code, "a pause without a reason is a usage error: %s", r)
	r = c.run("schedule", "pause", "tick", "--reason", "change freeze")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "paused every schedule trigger of tick: change freeze")
	var sc api.Schedule
	waitFor(t, 20*time.Second, "three slots are shown skipped by the pause", func() bool {
		sc = c.schedule(t)
		return len(pausedSlots(sc)) >= 3
	})
	for _, slot := range scheduled(tickRuns(t, s)) {
		// A slot that fired as the pause was written came before it.
		assert.Less(t, slot, pausedSlots(sc)[0].Slot, "no slot starts a run while paused")
	}
	require.NotNil(t, sc.Paused)
	assert.Equal(t, "alice", sc.Paused.By)
	assert.Equal(t, "change freeze", sc.Paused.Reason)
	for _, sl := range pausedSlots(sc) {
		assert.Equal(t, "paused by alice: change freeze", sl.Paused)
		assert.Empty(t, sl.Run)
	}
	r = c.run("schedule", "status", "tick")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "PAUSED by alice")
	assert.Contains(t, r.stdout, "skipped: the schedule was paused (paused by alice: change freeze)")

	// Run now, while paused: the trigger's inputs over trigger.slot = now.
	r = c.run("schedule", "run", "tick")
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	var now api.Run
	waitFor(t, 15*time.Second, "the run now succeeds", func() bool {
		code, m := s.api(t, "GET", "/api/v1/runs/"+id, nil)
		require.Equal(t, 200, code)
		b, _ := json.Marshal(m)
		require.NoError(t, json.Unmarshal(b, &now))
		return now.Status == state.RunSucceeded
	})
	assert.Equal(t, "alice", now.Trigger["by"])
	assert.Equal(t, "run now", now.Trigger["via"])
	assert.Equal(t, now.Trigger["slot"], now.Inputs["slot"], "the trigger's inputs are set over trigger.slot")
	assert.Equal(t, "alice", now.StartedBy())

	// Backfill the paused slots.
	paused := pausedSlots(sc)
	from, to := paused[0].Slot, paused[len(paused)-1].Slot
	n := len(paused)
	r = c.run("schedule", "backfill", "tick", "--from", from, "--to", to, "--max", "1")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "more than 1 slots")
	r = c.run("schedule", "backfill", "tick", "--from", from, "--to", to, "--dry-run")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, fmt.Sprintf("%d slots, %d would start (dry run: nothing started)", n, n))
	assert.Equal(t, n, strings.Count(r.stdout, "would start\n")+strings.Count(r.stdout, "would start  "), r.stdout)
	r = c.run("schedule", "backfill", "tick", "--from", from, "--to", to)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, fmt.Sprintf("%d slots, %d runs started", n, n))
	r = c.run("schedule", "backfill", "tick", "--from", from, "--to", to)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, fmt.Sprintf("%d slots, 0 runs started", n), "a second backfill of the range starts nothing")
	bySlot := map[string]int{}
	for _, run := range tickRuns(t, s) {
		if run.Trigger["via"] == "backfill" {
			bySlot[run.Trigger["slot"].(string)]++
			assert.Equal(t, run.Trigger["slot"], run.Inputs["slot"])
		}
	}
	assert.Len(t, bySlot, n)
	for slot, k := range bySlot {
		assert.Equal(t, 1, k, "slot %s has one backfilled run", slot)
	}

	// Resume: the schedule fires again.
	r = c.run("schedule", "resume", "tick", "--reason", "freeze over")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "resumed every schedule trigger of tick (paused by alice since")
	resumed := len(scheduled(tickRuns(t, s)))
	waitFor(t, 15*time.Second, "the schedule fires again after the resume", func() bool { return len(scheduled(tickRuns(t, s))) >= resumed+2 })
	r = c.run("schedule", "resume", "tick")
	assert.Equal(t, 1, r.code, "a second resume finds no pause: %s", r)

	c.env = admin
	r = c.run("audit", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var recs []state.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	got := map[string]state.AuditRecord{}
	var started []any
	for _, rec := range recs {
		if rec.Action == "schedule.backfill" {
			started = append(started, rec.Detail["started"])
		}
		if strings.HasPrefix(rec.Action, "schedule.") && rec.Result == "ok" {
			if _, seen := got[rec.Action]; !seen { // newest first
				got[rec.Action] = rec
			}
		}
	}
	for _, action := range []string{"schedule.pause", "schedule.run", "schedule.backfill", "schedule.resume"} {
		rec, ok := got[action]
		if assert.True(t, ok, "audited: %s", action) {
			assert.Equal(t, "alice", rec.Identity, action)
			assert.Equal(t, "playbook:tick", rec.Target, action)
		}
	}
	assert.Equal(t, "change freeze", got["schedule.pause"].Detail["reason"])
	assert.Equal(t, "freeze over", got["schedule.resume"].Detail["reason"])
	assert.Equal(t, id, got["schedule.run"].Detail["run"])
	assert.Equal(t, []any{0.0, float64(n), 0.0, 0.0}, started, "the backfills, newest first: again, real, dry, refused")
}
