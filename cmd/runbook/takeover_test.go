package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

// handoverPlaybook appends "one" to dir/<name>.txt, sleeps, then appends
// "two"; with takeOver it says take_over: true.
func handoverPlaybook(dir, name string, takeOver bool) string {
	out := filepath.Join(dir, name+".txt")
	return fmt.Sprintf(`version: 1
name: %s
take_over: %t
steps:
  - {id: one, uses: shell, with: {command: "echo one >> %s"}}
  - {id: nap, uses: sleep, with: {duration: 3s}}
  - {id: two, uses: shell, with: {command: "echo two >> %s"}}
`, name, takeOver, out, out)
}

// A run that runbook run started on the database is that process's: when
// the process is killed, the replicas take the run over (once its lease
// as a replica of kind run expired) only if its playbook says
// take_over: true, and finish it
// from its last durable step; a run of a playbook that does not stays
// interrupted for the command that resumes it.
func TestAReplicaTakesOverAKilledRunProcessesRunOnlyWhenItsPlaybookOptsIn(t *testing.T) {
	c, rs, st := twoReplicas(t, 1)
	type started struct {
		name string
		id   string
		kill func()
	}
	var runs []started
	for _, opt := range []bool{true, false} {
		name := map[bool]string{true: "handover", false: "keep"}[opt]
		pb := c.file(name+".yaml", handoverPlaybook(c.dir, name, opt))
		cmd, id := c.startUntil("step nap started", "run", pb)
		require.NotEmpty(t, id)
		runs = append(runs, started{name, id, func() { _ = cmd.Process.Signal(os.Kill); _ = cmd.Wait() }})
	}
	time.Sleep(200 * time.Millisecond) // the sleep's deadline is recorded
	for _, r := range runs {
		r.kill()
	}
	killedAt := time.Now()

	r := waitStatus(t, st, runs[0].id, state.RunSucceeded, replicaLease*3/2+10*time.Second)
	t.Logf("taken over and finished %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	assertOwner(t, rs.owner(0), r.Owner, "the replica finished it")
	got, err := os.ReadFile(filepath.Join(c.dir, "handover.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(got), "each step ran once: the first in the killed process, the second on the replica")

	// The replica polls the queue every second: the other run, whose
	// lease expired too, has been seen by now and left alone.
	time.Sleep(2 * time.Second)
	kept, err := st.GetRun(context.Background(), runs[1].id)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, kept.Status, "not taken over")
	assert.False(t, sameOwner(rs.owner(0), kept.Owner), "still the killed process's run, owner %s", kept.Owner)
	got, err = os.ReadFile(filepath.Join(c.dir, "keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(got))
	shown := c.run("runs", "show", runs[1].id)
	assert.Contains(t, shown.stdout, "interrupted", shown)
	assert.Contains(t, shown.stdout, "runbook run --resume "+runs[1].id, shown)
}
