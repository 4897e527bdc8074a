package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const simGatedPlaybook = `version: 1
name: sim-gated
steps:
  - id: gate
    uses: approval
    with: {message: read the versions?}
  - id: sup
    uses: nks.supports
`

const simFailingPlaybook = `version: 1
name: sim-breaks
steps:
  - id: sup
    uses: nks.supports
  - id: boom
    uses: fail
    with: {message: "it broke on purpose"}
`

// A run started with --sim-url records the simulator (without the
// credentials of the URL), so approving, resuming and retrying it reach
// the same simulator without the flag.
func TestARunStartedWithSimURLIsApprovedResumedAndRetriedAgainstTheSameSimulator(t *testing.T) {
	c := newCLI(t)
	base := c.startSim("--services", "identity,nks")
	withCreds, err := url.Parse(base)
	require.NoError(t, err)
	withCreds.User = url.UserPassword("ops", "hunter2")
	gated := c.file("gated.yaml", simGatedPlaybook)

	t.Run("the run records the simulator's URL without its password", func(t *testing.T) {
		r := c.run("run", "--sim-url", withCreds.String(), gated)
		require.Equal(t, 0, r.code, r)
		id := runIDOf(t, r.stdout)
		r = c.run("runs", "show", id, "--output", "json")
		require.Equal(t, 0, r.code, r)
		assert.NotContains(t, r.stdout, "hunter2")
		var doc struct {
			Run struct {
				Sim string `json:"sim"`
			} `json:"run"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
		assert.Equal(t, base, doc.Run.Sim)
	})

	t.Run("runs approve continues the run against the simulator", func(t *testing.T) {
		r := c.run("run", "--sim-url", base, gated)
		require.Equal(t, 0, r.code, r)
		id := runIDOf(t, r.stdout)
		r = c.run("runs", "approve", id, "gate")
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "run "+id+" succeeded", r)
		assert.NotContains(t, r.stdout+r.stderr, "not configured")
	})

	t.Run("run --resume after an answer recorded with --no-resume", func(t *testing.T) {
		r := c.run("run", "--sim-url", base, gated)
		require.Equal(t, 0, r.code, r)
		id := runIDOf(t, r.stdout)
		r = c.run("runs", "approve", id, "gate", "--no-resume")
		require.Equal(t, 0, r.code, r)
		r = c.run("run", "--resume", id)
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "run "+id+" succeeded", r)
	})

	t.Run("runs retry runs the retried steps against the simulator", func(t *testing.T) {
		r := c.run("run", "--sim-url", base, c.file("breaks.yaml", simFailingPlaybook))
		require.Equal(t, 1, r.code, r)
		id := runIDOf(t, r.stdout)
		r = c.run("runs", "retry", id, "--from", "sup")
		assert.Equal(t, 1, r.code, "the retry fails again at boom: %s", r)
		assert.Regexp(t, `step sup succeeded`, r.stdout)
		assert.Contains(t, r.stdout, "it broke on purpose")
		assert.NotContains(t, r.stdout+r.stderr, "not configured")
	})
}

// A run that was not started against a simulator and names a connection
// nobody configured says how to give one: the playbook, --sim or --sim-url.
func TestAnUnconfiguredConnectionNamesSimURL(t *testing.T) {
	c := newCLI(t)
	r := c.run("run", c.file("sup.yaml", "version: 1\nname: sup\nsteps:\n  - id: sup\n    uses: nks.supports\n"))
	assert.Equal(t, 1, r.code, r)
	out := r.stdout + r.stderr
	assert.Contains(t, out, `connection "nks" is not configured`)
	assert.True(t, strings.Contains(out, "--sim-url"), "the message names --sim-url: %s", out)
}
