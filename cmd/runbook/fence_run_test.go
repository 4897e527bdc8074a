package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// A runbook run process that cannot renew its lease — stopped (SIGSTOP)
// past it, as a laptop put to sleep with its lid closed — loses its run
// (take_over: true) to a replica, which finishes it. When the process
// goes on (SIGCONT) it runs no further step and writes nothing over the
// replica's records: every step's line is in the file once. It exits 3
// and says where the run went on.
func TestARunbookRunWhoseRunWasTakenOverStopsWhenItWakes(t *testing.T) {
	c, rs, st := twoReplicas(t, 1)
	out := filepath.Join(c.dir, "laptop.txt")
	pb := c.file("laptop.yaml", fmt.Sprintf(`version: 1
name: laptop
take_over: true
steps:
  - {id: one, uses: shell, with: {command: "echo one >> %[1]s"}}
  - {id: nap, uses: sleep, with: {duration: 3s}}
  - {id: two, uses: shell, with: {command: "echo two >> %[1]s"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo finally >> %[1]s"}}
`, out))

	cmd := exec.Command(bin, "run", pb)
	cmd.Dir, cmd.Env = c.dir, c.env
	var stdout, stderr syncBuffer
	pipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Process.Kill() })
	napping := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			_, _ = stdout.Write([]byte(line + "\n"))
			if strings.Contains(line, "step nap started") {
				napping <- line
			}
		}
	}()
	select {
	case <-napping:
	case <-time.After(10 * time.Second):
		t.Fatalf("no nap within 10s: %s %s", stdout.String(), stderr.String())
	}
	id := runIDOf(t, stdout.String())
	time.Sleep(300 * time.Millisecond) // the sleep's deadline is recorded
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()

	r := waitStatus(t, st, id, state.RunSucceeded, replicaLease*3/2+15*time.Second)
	t.Logf("taken over and finished %s after the process stopped", time.Since(stopped).Round(time.Millisecond))
	assertOwner(t, rs.owner(0), r.Owner, "the replica finished it")
	lines := func() string {
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "one\ntwo\nfinally\n", lines())

	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var ee *exec.ExitError
	select {
	case err := <-exited:
		require.True(t, errors.As(err, &ee), "exit: %v\n%s\n%s", err, stdout.String(), stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGCONT:\n%s\n%s", stdout.String(), stderr.String())
	}
	assert.Equal(t, 3, ee.ExitCode(), "%s\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "run "+id+" was taken over by replica "+rs.owner(0))
	assert.Contains(t, stdout.String(), "while this process could not renew its lease; it goes on there: runbook runs show "+id)
	assert.NotContains(t, stdout.String(), "step two started", "no step after the one cut short")

	assert.Equal(t, "one\ntwo\nfinally\n", lines(), "every step ran once")
	after, err := st.GetRun(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, state.RunSucceeded, after.Status, "nothing written over the replica's records")
	assertOwner(t, rs.owner(0), after.Owner, "still the replica's")
	recs, err := st.Steps(t.Context(), id)
	require.NoError(t, err)
	for _, rec := range recs {
		assert.Equal(t, state.StepSucceeded, rec.Status, "step %s as the replica left it", rec.ID)
	}
}

// runbook run --resume of a run a live replica executes (parked there on
// a long sleep) does not execute it beside the replica: its claim is
// refused, it exits 3 saying where the run goes on, and runs approve of a
// run waiting on a replica records the answer and leaves the run to it.
func TestARunOfALiveReplicaIsNotResumedNorContinuedByTheCLI(t *testing.T) {
	c, rs, st := twoReplicas(t, 1)
	code, run := rs.proc[0].api(t, "POST", "/api/v1/playbooks/parked/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	parked := run["id"].(string)
	waitStatus(t, st, parked, state.RunWaiting, 10*time.Second)

	r := c.run("run", "--resume", parked)
	assert.Equal(t, 3, r.code, r)
	assert.Contains(t, r.stdout, "run "+parked+" is executed by replica "+rs.owner(0))
	assert.Contains(t, r.stdout, "it goes on there: runbook runs show "+parked)
	got, err := st.GetRun(t.Context(), parked)
	require.NoError(t, err)
	assert.Equal(t, state.RunWaiting, got.Status, "left parked on the replica")

	code, run = rs.proc[0].api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	gated := run["id"].(string)
	waitStatus(t, st, gated, state.RunWaiting, 10*time.Second)
	r = c.run("runs", "approve", gated, "gate", "--field", "ticket=7")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "step gate of run "+gated+" approved; replica "+rs.owner(0))
	assert.Contains(t, r.stdout, " executes run "+gated+" and continues it")
	done := waitStatus(t, st, gated, state.RunSucceeded, 10*time.Second)
	assertOwner(t, rs.owner(0), done.Owner, "the replica went on with it")
}

// On a database, runbook run --resume of a run whose process was killed
// makes the run its own before executing it (a conditional claim), so
// its fenced writes pass: every step runs once, and the run is the
// resuming process's.
func TestResumeOnADatabaseClaimsTheRunOfAKilledProcess(t *testing.T) {
	c := newCLI(t)
	onDatabase(t, c)
	pb := c.file("crash.yaml", crashPlaybook)
	cmd, id := c.startUntil("step nap started", "run", pb)
	require.NotEmpty(t, id)
	time.Sleep(200 * time.Millisecond) // the sleep's deadline is recorded
	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()

	r := c.run("run", "--resume", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "run "+id+" succeeded")
	got, err := os.ReadFile(filepath.Join(c.dir, "steps.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\nthree\nfour\n", string(got), "every step ran once")
	assert.NotContains(t, r.stderr, "fenced")
}

// On a database, runs approve continuing a run parked by a runbook run
// that has exited, and runs retry executing its new run, make the run
// their own first, so their fenced writes pass.
func TestApproveAndRetryOnADatabaseClaimTheRunTheyExecute(t *testing.T) {
	c := newCLI(t)
	onDatabase(t, c)
	gated := c.file("gated.yaml", approvalPlaybook)
	r := c.run("run", gated)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	r = c.run("runs", "approve", id, "gate", "--field", "ticket=7")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "run "+id+" succeeded")

	flaky := c.file("flaky.yaml", fmt.Sprintf(`version: 1
name: flaky
steps:
  - {id: once, uses: shell, with: {command: "echo once >> %[1]s/flaky.txt"}}
  - {id: check, uses: shell, with: {command: "test -e %[1]s/fixed"}}
`, c.dir))
	r = c.run("run", flaky)
	require.Equal(t, 1, r.code, r)
	failed := runIDOf(t, r.stdout)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "fixed"), nil, 0o600))
	r = c.run("runs", "retry", failed)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "succeeded")
	got, err := os.ReadFile(filepath.Join(c.dir, "flaky.txt"))
	require.NoError(t, err)
	assert.Equal(t, "once\n", string(got), "the step that succeeded is reused, not run again")
}

// On a database, runs approve, retry and cancel continuing a run in their
// own process are replicas of kind run with the config's lease
// (server.lease), as runbook run is, not the default 10 s: a team that
// lengthened it for slow networks gets it from every process. Each verb's
// row in runbook_replicas, read while its step sleeps, lives for more than
// 20 s of the 47 s configured.
func TestTheRunsVerbsOnADatabaseTakeTheConfigsLease(t *testing.T) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	c.file("runbook.yaml", "server: {lease: 47s}\n")
	fixed := filepath.Join(c.dir, "fixed")
	pb := c.file("slow.yaml", fmt.Sprintf(`version: 1
name: slow
steps:
  - {id: gate, uses: approval, with: {message: go?}}
  - {id: nap, uses: shell, with: {command: "sleep 2; test -e %s"}}
finally:
  - {id: bye, uses: shell, with: {command: "sleep 2"}}
`, fixed))
	db, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer db.Close(context.Background())
	// leaseWhile runs the verb and returns how long the lease of the live
	// run replica had left, at most, while the verb ran.
	leaseWhile := func(args ...string) (result, float64) {
		t.Helper()
		done := make(chan result, 1)
		go func() { done <- c.run(args...) }()
		left := 0.0
		for {
			select {
			case r := <-done:
				return r, left
			case <-time.After(100 * time.Millisecond):
			}
			var s float64
			if db.QueryRow(t.Context(), `SELECT coalesce(max(extract(epoch FROM expires_at - now())), 0)::float8
				FROM runbook_replicas WHERE kind = 'run' AND expires_at > now()`).Scan(&s) == nil {
				left = max(left, s)
			}
		}
	}

	r := c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	r, left := leaseWhile("runs", "approve", id, "gate")
	require.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout, "failed")
	assert.Greater(t, left, 20.0, "runs approve's lease")

	require.NoError(t, os.WriteFile(fixed, nil, 0o600))
	r, left = leaseWhile("runs", "retry", id)
	require.Equal(t, 0, r.code, r)
	assert.Greater(t, left, 20.0, "runs retry's lease")

	r = c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	id = runIDOf(t, r.stdout)
	r, left = leaseWhile("runs", "cancel", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "run "+id+" cancelled")
	assert.Greater(t, left, 20.0, "runs cancel's lease")
}
