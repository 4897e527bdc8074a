package main

import (
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// onDatabase points the CLI's state at a fresh PostgreSQL schema.
func onDatabase(t *testing.T, c *cli) string {
	dsn := pgtest.DB(t)
	for i, e := range c.env {
		if strings.HasPrefix(e, "RUNBOOK_STATE=") {
			c.env[i] = "RUNBOOK_STATE=" + dsn
		}
	}
	return dsn
}

func TestMigrateShowsThenAppliesTheSchema(t *testing.T) {
	c := newCLI(t)
	dsn := onDatabase(t, c)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	require.NotEmpty(t, pw)

	dry := c.run("migrate", "--dry-run")
	require.Equal(t, 0, dry.code, dry)
	assert.Contains(t, dry.stdout, "-- migration 0001 ")
	assert.Contains(t, dry.stdout, "CREATE TABLE")
	again := c.run("migrate", "--dry-run")
	assert.Equal(t, dry.stdout, again.stdout, "a dry run changes nothing")

	applied := c.run("migrate")
	require.Equal(t, 0, applied.code, applied)
	assert.Contains(t, applied.stdout, "applied 0001 ")
	done := c.run("migrate")
	require.Equal(t, 0, done.code, done)
	assert.Contains(t, done.stdout, "is up to date")
	for _, r := range []result{dry, applied, done} {
		assert.NotContains(t, r.stdout+r.stderr, pw, "the database password is never printed")
	}

	file := c.run("migrate", "--state", c.state)
	assert.Equal(t, 2, file.code, file)
	assert.Contains(t, file.stderr, "migrate applies to a PostgreSQL state")
}

func TestRunsLiveInTheDatabaseSharedByProcesses(t *testing.T) {
	c := newCLI(t)
	onDatabase(t, c)
	hello := c.file("hello.yaml", helloPlaybook)
	// Two processes at once: a database is not held exclusively.
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.run("run", hello)
		}()
	}
	wg.Wait()
	var ids []string
	for _, r := range results {
		require.Equal(t, 0, r.code, r)
		ids = append(ids, runIDOf(t, r.stdout))
	}
	list := c.run("runs", "list")
	require.Equal(t, 0, list.code, list)
	for _, id := range ids {
		assert.Contains(t, list.stdout, id)
	}
	show := c.run("runs", "show", ids[0])
	require.Equal(t, 0, show.code, show)
	assert.Contains(t, show.stdout, "succeeded")
}

func TestABadDatabaseLocationIsToldWithoutItsPassword(t *testing.T) {
	c := newCLI(t)
	r := c.run("runs", "list", "--state", "postgres://runbook:hunter2@127.0.0.1:1/runbook?connect_timeout=2")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "PostgreSQL server")
	assert.NotContains(t, r.stdout+r.stderr, "hunter2")
}
