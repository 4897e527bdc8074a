package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// faultPlaybooks each append a line per execution of a shell step to the
// ledger (LEDGER, replaced by the test's file): "<run> <step>". keyed's
// runs take one concurrency key (a and b of one run hold it, with a nap
// between them); gated waits on an approval that its timeout approves;
// napper parks on a sleep.
var faultPlaybooks = map[string]string{
	"keyed.yaml": `version: 1
name: keyed
concurrency: {key: k, on_busy: queue}
steps:
  - {id: a, uses: shell, with: {command: "echo ${{ run.id }} a >> LEDGER"}}
  - {id: nap, uses: sleep, with: {duration: 200ms}}
  - {id: b, uses: shell, with: {command: "echo ${{ run.id }} b >> LEDGER"}}
`,
	"gated.yaml": `version: 1
name: gated
steps:
  - {id: gate, uses: approval, with: {message: "go?", timeout: 2s, on_timeout: approve}}
  - {id: a, uses: shell, with: {command: "echo ${{ run.id }} a >> LEDGER"}}
`,
	"napper.yaml": `version: 1
name: napper
steps:
  - {id: a, uses: shell, with: {command: "echo ${{ run.id }} a >> LEDGER"}}
  - {id: nap, uses: sleep, with: {duration: 3s}}
  - {id: b, uses: shell, with: {command: "echo ${{ run.id }} b >> LEDGER"}}
`,
}

// faultReplica starts a replica of runbook serve named process on dsn
// serving dir, with the lease of issue 27's campaign (3 s): the restart
// below outlasts its validity, so the replicas' leases lapse and expire
// while the database is down.
func faultReplica(t *testing.T, dsn, dir, process string) *env {
	t.Helper()
	store, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	return serveEnv(t, server.Options{
		Engine:  engine.Options{Store: store, Environ: []string{"PATH=" + os.Getenv("PATH")}, Process: process},
		KeyPoll: 200 * time.Millisecond, Playbooks: dir, Listen: "127.0.0.1:0", Token: token, Lease: 3 * time.Second, ShutdownGrace: 5 * time.Second,
	}, func(runErr error) {
		assert.NoError(t, runErr)
		require.NoError(t, store.Close())
	})
}

// Database faults while runs execute, queue on a concurrency key, wait on
// an approval and sleep parked, on two replicas: every client connection
// terminated, PostgreSQL restarted (a fast shutdown, down 1.5 s: longer
// than the replicas' leases hold), the connections terminated again. Every run ends succeeded within 60 s, none failed;
// no step that finished is executed again (each ledger line once); and
// the key's runs never overlap (each run's a and b are next to each other
// in the ledger).
func TestDatabaseFaultsFailNoRunRepeatNoStepAndOverlapNoKey(t *testing.T) {
	dsn, dir := pgtest.DB(t), t.TempDir()
	ledger := filepath.Join(t.TempDir(), "ledger")
	for name, src := range faultPlaybooks {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(src, "LEDGER", ledger)), 0o600))
	}
	replicas := []*env{faultReplica(t, dsn, dir, "replica-a/1"), faultReplica(t, dsn, dir, "replica-b/2")}
	var ids []string
	for i := range 12 {
		e := replicas[i%2]
		ids = append(ids, e.startRun([]string{"keyed", "keyed", "gated", "napper"}[i%4], nil))
	}
	require.Eventually(t, func() bool { return len(ledgerLines(t, ledger)) >= 3 }, 20*time.Second, 5*time.Millisecond, "runs execute")

	n := pgtest.Terminate(t)
	t.Logf("terminated %d connections", n)
	time.Sleep(300 * time.Millisecond)
	back := pgtest.Restart(t, 1500*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	n = pgtest.Terminate(t)
	t.Logf("terminated %d connections again", n)

	check, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	require.NoError(t, err)
	defer check.Close()
	final := map[string]*state.Run{}
	deadline := back.Add(60 * time.Second)
	for len(final) < len(ids) && time.Now().Before(deadline) {
		for _, id := range ids {
			if r, err := check.GetRun(context.Background(), id); err == nil && r.Status.Done() {
				final[id] = r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d runs final %s after the database answered again", len(final), time.Since(back).Round(time.Millisecond))
	for _, id := range ids {
		r := final[id]
		if !assert.NotNil(t, r, "run %s never finished", id) {
			continue
		}
		msg := ""
		if r.Error != nil {
			msg = r.Error.Message
		}
		assert.Equal(t, state.RunSucceeded, r.Status, "run %s (%s): %s", id, r.Playbook, msg)
	}

	lines := ledgerLines(t, ledger)
	seen := map[string]int{}
	for _, l := range lines {
		seen[l]++
	}
	for l, n := range seen {
		assert.Equal(t, 1, n, "step executed %d times: %s", n, l)
	}
	// The key's critical sections: a then b of one run, never another's
	// line of the key between them.
	var keyed []string
	for i, id := range ids {
		if i%4 < 2 {
			keyed = append(keyed, id)
		}
	}
	var open string
	for _, l := range lines {
		run, step, _ := strings.Cut(l, " ")
		if !contains(keyed, run) {
			continue
		}
		switch {
		case step == "a" && open != "":
			t.Errorf("run %s took the key while run %s held it", run, open)
		case step == "a":
			open = run
		case step == "b" && open == run:
			open = ""
		case step == "b":
			t.Errorf("run %s ended a critical section it was not in (the key was %q's)", run, open)
		}
	}
	want := 0
	for i := range ids {
		want += map[int]int{0: 2, 1: 2, 2: 1, 3: 2}[i%4]
	}
	assert.Len(t, lines, want, "every step executed: %v", lines)
}

func ledgerLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
