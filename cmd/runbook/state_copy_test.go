package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// countsRe reads a row of state copy's table: kind, source, destination.
var countsRe = regexp.MustCompile(`(?m)^\s*([a-z ]+?)\s+(\d+)\s+(\d+)\s*(DIFFERS)?$`)

func copyCounts(t *testing.T, out string) map[string][2]string {
	t.Helper()
	m := map[string][2]string{}
	for _, row := range countsRe.FindAllStringSubmatch(out, -1) {
		m[row[1]] = [2]string{row[2], row[3]}
	}
	return m
}

// liveDuration is the duration of an unfinished run or step, counted to
// now: it grows between two commands.
var liveDuration = regexp.MustCompile(`\d+(\.\d+)?[a-z]+…`)

func untilNow(s string) string { return liveDuration.ReplaceAllString(s, "…") }

func TestStateCopyMovesAFileToPostgresAndBack(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dsn := pgtest.DB(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	require.NotEmpty(t, pw)

	hello := c.run("run", c.file("hello.yaml", helloPlaybook))
	require.Equal(t, 0, hello.code, hello)
	failed := c.run("run", c.file("breaks.yaml", failingPlaybook))
	require.Equal(t, 1, failed.code, failed)
	gated := c.run("run", c.file("gated.yaml", approvalPlaybook))
	require.Contains(t, gated.stdout, "waiting for approval of step gate", gated)
	ids := []string{runIDOf(t, hello.stdout), runIDOf(t, failed.stdout), runIDOf(t, gated.stdout)}

	dry := c.run("state", "copy", "--from", c.state, "--dry-run")
	require.Equal(t, 0, dry.code, dry)
	assert.Regexp(t, `(?m)^runs\s+3$`, dry.stdout)

	toPG := c.run("state", "copy", "--from", c.state, "--to", dsn)
	require.Equal(t, 0, toPG.code, toPG)
	assert.Contains(t, toPG.stdout, "Every count matches.")
	counts := copyCounts(t, toPG.stdout)
	assert.Equal(t, [2]string{"3", "3"}, counts["runs"], toPG.stdout)
	assert.NotEqual(t, [2]string{"0", "0"}, counts["events"], toPG.stdout)
	assert.Equal(t, [2]string{"0", "0"}, counts["intents"], toPG.stdout)

	// The database shows the runs as the file does.
	for _, id := range ids {
		onFile := c.run("runs", "show", id)
		onDB := c.run("runs", "show", id, "--state", dsn)
		require.Equal(t, 0, onDB.code, onDB)
		assert.Equal(t, untilNow(onFile.stdout), untilNow(onDB.stdout), "runs show %s", id)
		logsFile := c.run("runs", "logs", id)
		logsDB := c.run("runs", "logs", id, "--state", dsn)
		assert.Equal(t, logsFile.stdout, logsDB.stdout, "runs logs %s", id)
	}
	listFile := c.run("runs", "list")
	listDB := c.run("runs", "list", "--state", dsn)
	assert.Equal(t, untilNow(listFile.stdout), untilNow(listDB.stdout))

	// A second copy into the same database is refused: never a merge.
	again := c.run("state", "copy", "--from", c.state, "--to", dsn)
	assert.Equal(t, 1, again.code, again)
	assert.Contains(t, again.stderr, "is not empty (runs: 3)")

	// Back into a new file: the same counts.
	back := filepath.Join(c.dir, "back", "state.db")
	toFile := c.run("state", "copy", "--from", dsn, "--to", back)
	require.Equal(t, 0, toFile.code, toFile)
	assert.Equal(t, counts, copyCounts(t, toFile.stdout))
	shown := c.run("runs", "show", ids[2], "--state", back)
	assert.Contains(t, shown.stdout, "waiting for approval of step gate", shown)
	// The waiting run goes on from the copy.
	approved := c.run("runs", "approve", ids[2], "gate", "--state", back, "--field", "ticket=7")
	assert.Equal(t, 0, approved.code, approved)
	assert.Contains(t, approved.stdout, "shipping ticket 7")

	for _, r := range []result{dry, toPG, again, toFile} {
		assert.NotContains(t, r.stdout+r.stderr, pw, "the database password is never printed")
	}
}

func TestStateCopyRefusals(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hello := c.run("run", c.file("hello.yaml", helloPlaybook))
	require.Equal(t, 0, hello.code, hello)

	t.Run("a destination file with runs is refused", func(t *testing.T) {
		other := newCLI(t)
		r := other.run("run", other.file("hello.yaml", helloPlaybook))
		require.Equal(t, 0, r.code, r)
		before, err := os.ReadFile(other.state)
		require.NoError(t, err)
		cp := c.run("state", "copy", "--from", c.state, "--to", other.state)
		assert.Equal(t, 1, cp.code, cp)
		assert.Contains(t, cp.stderr, "is not empty (runs: 1); state copy never merges")
		after, err := os.ReadFile(other.state)
		require.NoError(t, err)
		assert.Equal(t, before, after, "the destination is left as it was")
	})
	t.Run("copying a store onto itself is a usage error", func(t *testing.T) {
		cp := c.run("state", "copy", "--from", c.state, "--to", c.state)
		assert.Equal(t, 2, cp.code, cp)
		assert.Contains(t, cp.stderr, "name the same store")
	})
	t.Run("a missing source is refused and no destination is made", func(t *testing.T) {
		dst := filepath.Join(c.dir, "never.db")
		cp := c.run("state", "copy", "--from", filepath.Join(c.dir, "nope.db"), "--to", dst)
		assert.Equal(t, 1, cp.code, cp)
		_, err := os.Stat(dst)
		assert.True(t, os.IsNotExist(err), "a destination was created: %v", err)
	})
	t.Run("a file held by a running serve is refused with the server named", func(t *testing.T) {
		c.writePlaybooks(t)
		s := c.serveRuns(t)
		dst := filepath.Join(c.dir, "copy.db")
		cp := c.run("state", "copy", "--from", c.state, "--to", dst)
		assert.Equal(t, 1, cp.code, cp)
		assert.Contains(t, cp.stderr, "in use by another process")
		assert.Contains(t, cp.stderr, "stop the runbook serve")
		assert.Contains(t, cp.stderr, s.url)
		s.stop(t)
		cp = c.run("state", "copy", "--from", c.state, "--to", dst)
		assert.Equal(t, 0, cp.code, cp)
		assert.True(t, strings.Contains(cp.stdout, "Every count matches."), cp)
	})
}
