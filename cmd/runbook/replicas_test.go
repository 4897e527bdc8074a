package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
)

// napPlaybook sleeps, then appends a line to dir/after.txt: a run long
// enough to be cancelled or cut by a kill.
func napPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: nap
steps:
  - {id: nap, uses: sleep, with: {duration: 1500ms}}
  - {id: after, uses: shell, with: {command: "echo after >> %s"}}
`, filepath.Join(dir, "after.txt"))
}

// parkedPlaybook parks (a sleep of a minute, under a concurrency key),
// then appends to dir/after.txt; its finally step appends to
// dir/finally.txt.
func parkedPlaybook(dir string) string {
	return fmt.Sprintf(`version: 1
name: parked
concurrency: {key: parked-key}
steps:
  - {id: nap, uses: sleep, with: {duration: 1m}}
  - {id: after, uses: shell, with: {command: "echo after >> %s"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo finally >> %s"}}
`, filepath.Join(dir, "after.txt"), filepath.Join(dir, "finally.txt"))
}

// twoReplicas starts replicas of runbook serve on one fresh database
// (lease 2 s) and returns them with a store on the database.
func twoReplicas(t *testing.T, n int) (*cli, *replicaSet, *postgres.Store) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/gated.yaml", approvalPlaybook)
	c.file("playbooks/nap.yaml", napPlaybook(c.dir))
	c.file("playbooks/parked.yaml", parkedPlaybook(c.dir))
	c.file("playbooks/two-person.yaml", twoPersonPlaybook(c.dir))
	c.file("runbook.yaml", fmt.Sprintf("server: {lease: %s}\n", replicaLease))
	host, err := os.Hostname()
	require.NoError(t, err)
	rs := &replicaSet{c: c, args: []string{"--playbooks", filepath.Join(c.dir, "playbooks")}, proc: make([]*serveProc, n), host: host}
	for i := range n {
		rs.start(i)
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return c, rs, st
}

// waitStatus waits up to within for run id to have status want.
func waitStatus(t *testing.T, st state.Store, id string, want state.RunStatus, within time.Duration) *state.Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := st.GetRun(context.Background(), id)
		require.NoError(t, err)
		if r.Status == want {
			return r
		}
		require.True(t, time.Now().Before(deadline), "run %s is %s after %s, want %s", id, r.Status, within, want)
		time.Sleep(20 * time.Millisecond)
	}
}

// sameOwner reports whether owner (a run's, the engine's process ID:
// host/pid, with "@start" on Linux) is the process hostPID names.
func sameOwner(hostPID, owner string) bool {
	return owner == hostPID || strings.HasPrefix(owner, hostPID+"@")
}

func assertOwner(t *testing.T, hostPID, owner, msg string) {
	t.Helper()
	assert.True(t, sameOwner(hostPID, owner), "%s: owner %s, want process %s", msg, owner, hostPID)
}

// owner is replica i's host/pid (its process ID without the start time).
func (rs *replicaSet) owner(i int) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return fmt.Sprintf("%s/%d", rs.host, rs.proc[i].cmd.Process.Pid)
}

// An approval answered on replica B continues the run waiting on replica A
// at once (a notice; the server's own poll is 30 s), and a cancel on B
// stops the run executing on A: neither run moves to B.
func TestAReplicaAnswersAndCancelsTheRunsOfAnother(t *testing.T) {
	_, rs, st := twoReplicas(t, 2)
	a, b := rs.proc[0], rs.proc[1]

	code, run := a.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)
	waitStatus(t, st, id, state.RunWaiting, 10*time.Second)
	code, ans := b.api(t, "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "step": "gate", "by": "alice", "fields": map[string]any{"ticket": 7}})
	require.Equal(t, 200, code, ans)
	answered := time.Now()
	r := waitStatus(t, st, id, state.RunSucceeded, 5*time.Second)
	t.Logf("approved on B, succeeded on A %s later", time.Since(answered))
	assertOwner(t, rs.owner(0), r.Owner, "A executed it to the end")

	code, run = a.api(t, "POST", "/api/v1/playbooks/nap/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id = run["id"].(string)
	waitStatus(t, st, id, state.RunRunning, 10*time.Second)
	code, ans = b.api(t, "POST", "/api/v1/runs/"+id+"/cancel?by=bob", nil)
	require.Equal(t, 202, code, ans)
	r = waitStatus(t, st, id, state.RunCancelled, 5*time.Second)
	assertOwner(t, rs.owner(0), r.Owner, "A")
	time.Sleep(2 * time.Second) // past the end of the sleep
	_, err := os.Stat(filepath.Join(rs.c.dir, "after.txt"))
	assert.True(t, os.IsNotExist(err), "the step after the sleep never ran: A stopped the run")
	r, err = st.GetRun(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, r.Status, "A recorded it cancelled too")
}

// A run of a killed replica is shown running (a replica takes it over),
// not interrupted, and another replica resumes it after the lease.
func TestARunOfAKilledReplicaIsTakenOverNotShownInterrupted(t *testing.T) {
	c, rs, st := twoReplicas(t, 2)
	code, run := rs.proc[0].api(t, "POST", "/api/v1/playbooks/nap/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)
	waitStatus(t, st, id, state.RunRunning, 10*time.Second)
	killed := rs.owner(0)
	rs.kill(0)
	at := time.Now()

	shown := c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, shown.code, shown)
	var doc struct {
		Run struct{ Status string } `json:"run"`
	}
	require.NoError(t, json.Unmarshal([]byte(shown.stdout), &doc), shown.stdout)
	assert.Equal(t, "running", doc.Run.Status, "a replica will take it over: not interrupted")

	r := waitStatus(t, st, id, state.RunSucceeded, replicaLease+5*time.Second)
	assertOwner(t, rs.owner(1), r.Owner, "B took it over")
	assert.False(t, sameOwner(killed, r.Owner), "not the killed replica")
	evs, err := st.Events(context.Background(), id, 0, 0)
	require.NoError(t, err)
	for _, ev := range evs {
		if ev.Type == "run.resumed" && ev.Time.After(at) {
			t.Logf("resumed on B %s after the kill", ev.Time.Sub(at))
			assert.LessOrEqual(t, ev.Time.Sub(at), takeoverBound)
		}
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "after.txt"))
	require.NoError(t, err)
	assert.Equal(t, "after\n", string(b), "the step after the sleep ran once")
}

// A cancel on replica B of a run parked on replica A (a long sleep: no
// goroutine) is carried to A, which ends the run cancelled: its finally
// step runs there and its concurrency key is released.
func TestACancelOnOneReplicaEndsARunParkedOnAnother(t *testing.T) {
	c, rs, st := twoReplicas(t, 2)
	code, run := rs.proc[0].api(t, "POST", "/api/v1/playbooks/parked/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)
	waitStatus(t, st, id, state.RunWaiting, 10*time.Second)
	locks, err := st.Locks(context.Background())
	require.NoError(t, err)
	require.Len(t, locks, 1, "the parked run keeps its key")

	code, ans := rs.proc[1].api(t, "POST", "/api/v1/runs/"+id+"/cancel?by=bob", nil)
	require.Equal(t, 202, code, ans)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(c.dir, "finally.txt"))
		if string(b) == "finally\n" {
			break
		}
		if time.Now().After(deadline) {
			rs.logRun(t, st, id)
			t.Fatalf("the finally step did not run within 5 s: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := waitStatus(t, st, id, state.RunCancelled, 5*time.Second)
	assertOwner(t, rs.owner(0), r.Owner, "A ended it")
	require.Eventually(t, func() bool {
		locks, err := st.Locks(context.Background())
		return err == nil && len(locks) == 0
	}, 5*time.Second, 20*time.Millisecond, "the key is released")
	_, err = os.Stat(filepath.Join(c.dir, "after.txt"))
	assert.True(t, os.IsNotExist(err), "the step after the sleep never ran")
}

// A runbook run against the database beside the replicas leaves their
// runs' concurrency keys alone: the key of a run parked on a replica is
// still held after it.
func TestARunBesideReplicasKeepsTheirKeys(t *testing.T) {
	c, rs, st := twoReplicas(t, 1)
	code, run := rs.proc[0].api(t, "POST", "/api/v1/playbooks/parked/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)
	waitStatus(t, st, id, state.RunWaiting, 10*time.Second)

	hello := c.file("hello.yaml", "version: 1\nname: hello\nsteps:\n  - {id: hi, uses: log, with: {message: hi}}\n")
	r := c.run("run", hello)
	require.Equal(t, 0, r.code, r)
	locks, err := st.Locks(context.Background())
	require.NoError(t, err)
	require.Len(t, locks, 1, "the parked run's key is still held")
	assert.Equal(t, id, locks[0].Owner)
}
