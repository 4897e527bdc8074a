package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInitWritesAStarterThatValidatesAndRuns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := filepath.Join(c.dir, "proj")
	pb := filepath.Join(dir, "playbooks", "hello.yaml")
	cfg := filepath.Join(dir, "runbook.yaml")

	r := c.run("init", dir)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "wrote "+cfg)
	assert.Contains(t, r.stdout, "wrote "+pb)

	t.Run("the playbook is commented and validate accepts it", func(t *testing.T) {
		src, err := os.ReadFile(pb)
		require.NoError(t, err)
		assert.Contains(t, string(src), "# ")
		r := c.run("validate", pb)
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "ok  "+pb)
	})
	t.Run("config check accepts the config and finds the playbook", func(t *testing.T) {
		r := c.run("config", "check", cfg)
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "(1 playbook)")
	})
	t.Run("the playbook runs to success against the simulators", func(t *testing.T) {
		r := c.run("run", pb, "--sim", "-i", "who=ops")
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "hello ops")
		assert.Regexp(t, `run \S+ succeeded`, r.stdout)
	})
	t.Run("existing files are not overwritten and are named", func(t *testing.T) {
		require.NoError(t, os.WriteFile(pb, []byte("mine"), 0o600))
		r := c.run("init", dir)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, cfg)
		assert.Contains(t, r.stderr, pb)
		assert.Contains(t, r.stderr, "--force")
		got, _ := os.ReadFile(pb)
		assert.Equal(t, "mine", string(got))
	})
	t.Run("--force overwrites them", func(t *testing.T) {
		r := c.run("init", "--force", dir)
		assert.Equal(t, 0, r.code, r)
		got, _ := os.ReadFile(pb)
		assert.Contains(t, string(got), "name: hello")
	})
	t.Run("without DIR it writes into the working directory", func(t *testing.T) {
		r := c.run("init")
		assert.Equal(t, 0, r.code, r)
		_, err := os.Stat(filepath.Join(c.dir, "runbook.yaml"))
		assert.NoError(t, err)
		_, err = os.Stat(filepath.Join(c.dir, "playbooks", "hello.yaml"))
		assert.NoError(t, err)
	})
}
