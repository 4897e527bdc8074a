package server_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/internal/trigger"
)

const helloPlaybook = `version: 1
name: note
steps:
  - id: a
    uses: log
    with: {message: hi}
`

const boomPlaybook = `version: 1
name: boom
steps:
  - id: fail
    uses: fail
    with: {message: "no"}
`

// series reads GET /metrics into a map from each sample's name and labels,
// as the text format prints them, to its value.
func (e *env) series() map[string]float64 {
	e.t.Helper()
	r := e.do("GET", "/metrics", "", nil)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(e.t, err, line)
		out[line[:i]] = v
	}
	return out
}

// A failure alert can be written per playbook: the run counters carry the
// playbook and what started the run, and exist at 0 before the first run,
// so a rule's increase() sees the first failure; the last failure's time
// is there at once, and an approval waiting shows with its age.
func TestMetricsCountRunsByPlaybookAndTrigger(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "hook.yaml": hookPlaybook, "boom.yaml": boomPlaybook})
	gate := e.api("POST", "/api/v1/playbooks/gate/runs", nil).json(t)["id"].(string)
	e.waitStatus(gate, state.RunWaiting)
	time.Sleep(20 * time.Millisecond) // the approval's age
	before := e.series()
	for _, s := range []string{
		`runbook_runs_finished_total{playbook="boom",status="failed",trigger="api"}`,
		`runbook_runs_finished_total{playbook="unsub",status="failed",trigger="webhook"}`,
		`runbook_runs_finished_total{playbook="gate",status="succeeded",trigger="retry"}`,
		`runbook_runs_finished_total{playbook="boom",status="failed",trigger="rerun"}`,
		`runbook_playbook_last_failure_timestamp_seconds{playbook="boom"}`,
		`runbook_playbook_last_success_timestamp_seconds{playbook="unsub"}`,
		`runbook_approvals_waiting{playbook="boom"}`,
	} {
		v, ok := before[s]
		if assert.True(t, ok, "%s is missing before any run", s) {
			assert.Zero(t, v, s)
		}
	}
	assert.Equal(t, 1.0, before[`runbook_approvals_waiting{playbook="gate"}`])
	assert.Greater(t, before[`runbook_approvals_oldest_waiting_seconds{playbook="gate"}`], 0.0)

	boom := e.api("POST", "/api/v1/playbooks/boom/runs", nil).json(t)["id"].(string)
	e.waitStatus(boom, state.RunFailed)
	rerun := e.api("POST", "/api/v1/runs/"+boom+"/rerun", map[string]any{})
	require.Equal(t, http.StatusCreated, rerun.status, "%s", rerun.body)
	ended := e.waitStatus(rerun.json(t)["id"].(string), state.RunFailed)
	endedAt, err := time.Parse(time.RFC3339Nano, ended["ended_at"].(string))
	require.NoError(t, err)
	req, _ := http.NewRequest("POST", e.url+"/hooks/sms", strings.NewReader(unsubscribeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var after map[string]float64
	require.Eventually(t, func() bool {
		after = e.series()
		// The events reach the metrics just after their commit, a
		// step's end from the step's goroutine, which can come after
		// its run's end under load (seen once in a full pass with both
		// cores busy): each count is waited for.
		return after[`runbook_runs_finished_total{playbook="unsub",status="succeeded",trigger="webhook"}`] == 1 &&
			after[`runbook_runs_finished_total{playbook="boom",status="failed",trigger="api"}`] == 1 &&
			after[`runbook_runs_finished_total{playbook="boom",status="failed",trigger="rerun"}`] == 1 &&
			after[`runbook_run_duration_seconds_count{playbook="boom",status="failed",trigger="api"}`] == 1 &&
			after[`runbook_step_duration_seconds_count{outcome="failed",playbook="boom",trigger="api"}`] == 1 &&
			after[`runbook_step_duration_seconds_count{outcome="succeeded",playbook="unsub",trigger="webhook"}`] == 1
	}, 10*time.Second, 10*time.Millisecond, "the runs and their steps are counted under their playbook and trigger")
	assert.InDelta(t, float64(endedAt.UnixNano())/1e9, after[`runbook_playbook_last_failure_timestamp_seconds{playbook="boom"}`], 0.001, "the rerun's end, the last failure")
	assert.Zero(t, after[`runbook_playbook_last_success_timestamp_seconds{playbook="boom"}`], "never succeeded")
}

// The dead man's switch survives a restart: a server started again on the
// state file shows the last success recorded there before any run.
func TestLastSuccessIsReadFromTheStoreAfterARestart(t *testing.T) {
	dir, file := t.TempDir(), filepath.Join(t.TempDir(), "state.db")
	first := start(t, dir, file, map[string]string{"note.yaml": helloPlaybook})
	id := first.api("POST", "/api/v1/playbooks/note/runs", nil).json(t)["id"].(string)
	m := first.waitStatus(id, state.RunSucceeded)
	endedAt, err := time.Parse(time.RFC3339Nano, m["ended_at"].(string))
	require.NoError(t, err)
	first.stop()

	again := start(t, dir, file, nil)
	s := again.series()
	assert.InDelta(t, float64(endedAt.UnixNano())/1e9, s[`runbook_playbook_last_success_timestamp_seconds{playbook="note"}`], 0.001)
	assert.Contains(t, s, `runbook_playbook_last_failure_timestamp_seconds{playbook="note"}`)
}

const nightlyPlaybook = `version: 1
name: nightly
triggers:
  - webhook: {route: sms}
  - schedule: {cron: "0 3 * * *", timezone: Asia/Seoul}
  - schedule: {cron: "0 9 * * MON-FRI"}
  - schedule: {cron: "* * * * * *"}
  - schedule: {cron: "0 3 1 * *"}
steps:
  - id: a
    uses: log
    with: {message: hi}
`

// Each schedule trigger has its next slot, the longest gap between its
// slots (what a dead man's switch compares the last success with), whether
// it is paused, and its firings counted at 0 before the first one.
func TestScheduleSeriesExistFromTheStart(t *testing.T) {
	e := newEnv(t, map[string]string{"nightly.yaml": nightlyPlaybook})
	r := e.api("POST", "/api/v1/playbooks/nightly/schedules/pause", map[string]any{"trigger": 2, "reason": "change freeze"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	s := e.series()
	assert.Equal(t, 1.0, s[`runbook_schedule_paused{playbook="nightly",trigger="2"}`])
	if assert.Contains(t, s, `runbook_schedule_paused{playbook="nightly",trigger="1"}`) {
		assert.Zero(t, s[`runbook_schedule_paused{playbook="nightly",trigger="1"}`])
	}
	pb, err := playbook.Parse("nightly.yaml", []byte(nightlyPlaybook), playbook.LoadOptions{})
	require.NoError(t, err)
	next, err := trigger.NextSlots(pb.Triggers[1].Schedule, time.Now(), 1)
	require.NoError(t, err)
	assert.Equal(t, float64(next[0].Unix()), s[`runbook_schedule_next_fire_timestamp_seconds{playbook="nightly",trigger="1"}`])
	assert.Equal(t, 86400.0, s[`runbook_schedule_interval_seconds{playbook="nightly",trigger="1"}`])
	assert.Equal(t, 3*86400.0, s[`runbook_schedule_interval_seconds{playbook="nightly",trigger="2"}`], "Friday to Monday")
	assert.Equal(t, 1.0, s[`runbook_schedule_interval_seconds{playbook="nightly",trigger="3"}`], "every second")
	assert.InDelta(t, 29.5*86400, s[`runbook_schedule_interval_seconds{playbook="nightly",trigger="4"}`], 1.5*86400, "monthly: two slots at least")
	assert.NotContains(t, s, `runbook_schedule_next_fire_timestamp_seconds{playbook="nightly",trigger="0"}`, "a webhook trigger")
	for _, o := range []string{"started", "skipped", "queued", "dropped", "failed"} {
		k := `runbook_schedule_firings_total{outcome="` + o + `",playbook="nightly",trigger="2"}`
		if assert.Contains(t, s, k) {
			assert.Zero(t, s[k])
		}
	}
}

const slowPlaybook = `version: 1
name: slow
steps:
  - id: a
    uses: shell
    with: {command: "sleep 6"}
`

// A run created through one replica and executed by another leaves the
// first replica's runbook_runs once the store records its end: replica
// A, its one slot busy, queues the run; B takes it from the database's
// queue and finishes it; A's scrape counts it succeeded, not pending, and
// shows its end as the playbook's last success.
func TestAReplicaCountsTheEndOfARunAnotherReplicaExecuted(t *testing.T) {
	dsn, dir := pgtest.DB(t), t.TempDir()
	for name, src := range map[string]string{"note.yaml": helloPlaybook, "slow.yaml": slowPlaybook} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	replica := func(process string, maxRunning int) *env {
		store, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		require.NoError(t, err)
		return serveEnv(t, server.Options{
			Engine:    engine.Options{Store: store, Environ: []string{}, Process: process},
			Playbooks: dir, Listen: "127.0.0.1:0", Token: token, Lease: 2 * time.Second, ShutdownGrace: 10 * time.Second,
			MaxRunning: maxRunning,
		}, func(error) { require.NoError(t, store.Close()) })
	}
	a, b := replica("replica-a/1", 1), replica("replica-b/2", 0)
	slow := a.api("POST", "/api/v1/playbooks/slow/runs", nil).json(t)["id"].(string)
	a.waitStatus(slow, state.RunRunning)
	note := a.api("POST", "/api/v1/playbooks/note/runs", nil).json(t)["id"].(string)
	m := b.waitStatus(note, state.RunSucceeded)
	require.Equal(t, "replica-b/2", m["owner"], "B executed the run A created")

	endedAt, err := time.Parse(time.RFC3339Nano, m["ended_at"].(string))
	require.NoError(t, err)
	s := a.series()
	assert.InDelta(t, float64(endedAt.UnixNano())/1e9, s[`runbook_playbook_last_success_timestamp_seconds{playbook="note"}`], 0.001,
		"A shows the last success of a run B executed, as the database records it")
	assert.Zero(t, s[`runbook_runs{status="pending"}`], "A still counts the run B finished as pending")
	assert.Equal(t, 1.0, s[`runbook_runs{status="succeeded"}`])
	assert.Equal(t, 1.0, s[`runbook_runs{status="running"}`], "its own run")
	assert.Equal(t, 1.0, a.series()[`runbook_runs{status="running"}`], "a second scrape agrees")
}
