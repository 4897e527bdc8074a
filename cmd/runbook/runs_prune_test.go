package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listedIDs returns the IDs runs list --output json shows.
func listedIDs(t *testing.T, c *cli) []string {
	t.Helper()
	r := c.run("runs", "list", "--limit", "0", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var runs []struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &runs))
	var out []string
	for _, run := range runs {
		out = append(out, run.ID)
	}
	return out
}

func TestRunsPruneDeletesFinishedRunsOlderThanTheAge(t *testing.T) {
	c := newCLI(t)
	ok := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	failed := runIDOf(t, c.run("run", c.file("breaks.yaml", failingPlaybook)).stdout)
	waiting := runIDOf(t, c.run("run", c.file("gated.yaml", approvalPlaybook)).stdout)
	// The age each prune is given splits the runs at a moment between the
	// old runs' end and the recent run's start, whatever time the CLI calls
	// take on a loaded machine: a fixed age would reach the recent run once
	// the calls before it had taken longer than the gap.
	split := time.Now().Add(time.Second)
	time.Sleep(2 * time.Second)
	recent := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	age := func() string { return time.Since(split).Round(time.Millisecond).String() }

	t.Run("a dry run lists and deletes nothing", func(t *testing.T) {
		r := c.run("runs", "prune", "--older-than", age(), "--dry-run")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "would delete run "+ok)
		assert.Contains(t, r.stdout, "would delete run "+failed)
		assert.NotContains(t, r.stdout, waiting, "a waiting run is never pruned")
		assert.NotContains(t, r.stdout, recent)
		assert.Len(t, listedIDs(t, c), 4)
	})
	t.Run("--status limits it to runs that ended so", func(t *testing.T) {
		a := age()
		r := c.run("runs", "prune", "--older-than", a, "--status", "failed")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "deleted run "+failed)
		assert.Contains(t, r.stdout, "1 finished run(s) older than "+a+" deleted")
		assert.ElementsMatch(t, []string{ok, waiting, recent}, listedIDs(t, c))
		r = c.run("runs", "show", failed)
		assert.Equal(t, 1, r.code, "its steps and events are gone with it: %s", r)
	})
	t.Run("the rest of the old finished runs", func(t *testing.T) {
		r := c.run("runs", "prune", "--older-than", age())
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "deleted run "+ok)
		assert.ElementsMatch(t, []string{waiting, recent}, listedIDs(t, c))
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"runs", "prune"},
			{"runs", "prune", "--older-than", "soon"},
			{"runs", "prune", "--older-than", "30d", "--status", "waiting"},
		} {
			r := c.run(args...)
			assert.Equal(t, 2, r.code, "%v: %s", args, r)
		}
	})
}

// serve applies the config's retention: at start (then daily): old
// finished runs go, unfinished and recent ones stay.
func TestServeAppliesTheConfigsRetention(t *testing.T) {
	c := newCLI(t)
	old := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	waiting := runIDOf(t, c.run("run", c.file("gated.yaml", approvalPlaybook)).stdout)
	time.Sleep(2100 * time.Millisecond)
	recent := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("runbook.yaml", "retention:\n  older_than: 2s\n")

	s := c.serve("-v")
	require.Eventually(t, func() bool {
		return strings.Contains(s.stderrText(), `msg="retention: runs pruned" runs=1 older_than=2s`)
	}, 10*time.Second, 20*time.Millisecond, s.stderrText())
	s.stop(t)
	assert.ElementsMatch(t, []string{waiting, recent}, listedIDs(t, c), "run %s was pruned", old)
}

func TestConfigRetentionIsChecked(t *testing.T) {
	c := newCLI(t)
	c.file("runbook.yaml", "retention:\n  older_than: soon\n  status: [waiting]\n")
	r := c.run("config", "check")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "retention.older_than")
	assert.Contains(t, r.stderr, `retention.status[0]: must be one of succeeded, failed, cancelled, skipped (got "waiting")`)
}
