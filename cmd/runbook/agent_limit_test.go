package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An agent of capacity 4 with --limit 'heavy-*=1' given two runs of
// heavy-x and two of light at once: it never runs two heavy attempts at
// once (the second waits, its log saying which limit holds it), and the
// light ones are not held up by the waiting heavy one. The agents list
// (API and CLI) shows the limit and how many attempts it holds.
func TestAnAgentsLimitPerPlaybookHoldsTheHeavyRunsAndNotTheLightOnes(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "running"), 0o700))
	// A heavy attempt marks itself running, records how many are, and
	// holds until the gate opens.
	c.file("playbooks/heavy-x.yaml", fmt.Sprintf(`version: 1
name: heavy-x
steps:
  - id: work
    uses: shell
    runs_on: {labels: {pool: p}}
    with:
      command: |
        touch %[1]s/running/${{ run.id }}
        ls %[1]s/running | wc -l >> %[1]s/heavy-counts
        echo "heavy on $AGENT_NAME"
        while [ ! -e %[1]s/gate ]; do sleep 0.02; done
        rm %[1]s/running/${{ run.id }}
`, c.dir))
	c.file("playbooks/light.yaml", `version: 1
name: light
steps:
  - id: work
    uses: shell
    runs_on: {labels: {pool: p}}
    with: {command: 'echo "light on $AGENT_NAME"'}
`)
	s := c.serve("--agent-lease", "3s")
	c.agent(s, "limited", "pool=p", 4, "--limit", "heavy-*=1")

	heavy := []string{startRun(t, s, "heavy-x"), startRun(t, s, "heavy-x")}
	light := []string{startRun(t, s, "light"), startRun(t, s, "light")}
	for _, id := range light {
		run := endOf(t, s, id, 20*time.Second)
		require.Equal(t, "succeeded", run["status"], run)
		assert.Contains(t, outputOf(t, s, id), "light on limited")
	}
	// The light runs ended with the gate shut: one heavy attempt holds
	// the limit, the other waits for it.
	var started, waiting string
	require.Eventually(t, func() bool {
		started, waiting = "", ""
		for _, id := range heavy {
			if strings.Contains(outputOf(t, s, id), "heavy on limited") {
				started = id
			} else {
				waiting = id
			}
		}
		return started != "" && waiting != ""
	}, 15*time.Second, 20*time.Millisecond, "one heavy attempt runs, the other waits")
	_, run := s.api(t, "GET", "/api/v1/runs/"+waiting, nil)
	assert.Equal(t, "running", run["status"])

	_, l := s.api(t, "GET", "/api/v1/agents", nil)
	require.Len(t, l["agents"], 1)
	ag := l["agents"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{map[string]any{"pattern": "heavy-*", "max": float64(1), "held": float64(1)}}, ag["limits"])
	r := c.admin().run("agents", "list", "--server", s.url)
	require.Equal(t, 0, r.code, r.String())
	assert.Regexp(t, `limited\s+pool=p\s+1/4\s+heavy-\* 1/1\s`, r.stdout)

	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600))
	for _, id := range heavy {
		run := endOf(t, s, id, 20*time.Second)
		require.Equal(t, "succeeded", run["status"], run)
		assert.Contains(t, outputOf(t, s, id), "heavy on limited")
	}
	_, ev := s.api(t, "GET", "/api/v1/runs/"+waiting+"/events", nil)
	assert.Contains(t, fmt.Sprint(ev), "waiting for an agent with pool=p; at their limit for this playbook: limited (heavy-*=1)",
		"the step that waited said which limit held it")
	b, err := os.ReadFile(filepath.Join(c.dir, "heavy-counts"))
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "1"}, strings.Fields(string(b)), "heavy attempts running at once, as each started")
}

// runbook agent refuses a --limit it cannot keep, before it dials out:
// exit 2 with what is wrong.
func TestAgentLimitsAreCheckedOnTheCommandLine(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct{ name, limit, want string }{
		{"a bad pattern", "[heavy=1", `--limit [heavy=1: pattern "[heavy": syntax error in pattern`},
		{"no number", "heavy-*", `--limit "heavy-*": want PATTERN=N`},
		{"fewer than one at once", "heavy-*=0", "--limit heavy-*=0: at least 1 attempt at once"},
		{"more than the capacity", "heavy-*=3", "--limit heavy-*=3: more attempts at once than the agent's capacity (2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run("agent", "--server", "http://127.0.0.1:9", "--capacity", "2", "--labels", "pool=p", "--limit", tc.limit)
			assert.Equal(t, 2, r.code, r.String())
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}
