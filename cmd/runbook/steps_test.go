package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStepsListsEveryTypeWithItsSummary(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("steps")
	require.Equal(t, 0, r.code, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.Regexp(t, `^TYPE\s+SUMMARY$`, lines[0])
	for _, typ := range []string{"log", "set", "sleep", "fail", "shell", "http.request", "approval", "playbook"} {
		assert.Regexp(t, `(?m)^`+regexpQuote(typ)+`\s{3,}\S`, r.stdout)
	}
	col := strings.Index(lines[0], "SUMMARY")
	for _, l := range lines[1:] {
		require.Greater(t, len(l), col, l)
		assert.Equal(t, byte(' '), l[col-1], "summaries start in one column: %q", l)
		assert.NotEqual(t, byte(' '), l[col], "summaries start in one column: %q", l)
	}

	r = c.run("steps", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	assert.GreaterOrEqual(t, len(list), 8)
}

func regexpQuote(s string) string { return strings.ReplaceAll(s, ".", `\.`) }

func TestStepsDescribesOneType(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("steps", "log")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "log — ")
	assert.Regexp(t, `(?m)^\s+message\s+string\s+yes\s+the line to log`, r.stdout)
	assert.Regexp(t, `(?m)^\s+level\s+string\s+info\s+one of debug\|info\|warn\|error`, r.stdout)
	assert.Regexp(t, `(?m)^Outputs:\n\s+message\s+string`, r.stdout)

	r = c.run("steps", "shell", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var d struct {
		Type   string `json:"type"`
		Params []struct {
			Name        string   `json:"name"`
			Required    bool     `json:"required"`
			Default     any      `json:"default"`
			Constraints []string `json:"constraints"`
		} `json:"params"`
		Outputs []map[string]any `json:"outputs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
	assert.Equal(t, "shell", d.Type)
	found := false
	for _, p := range d.Params {
		if p.Name == "max_output_bytes" {
			found = true
			assert.EqualValues(t, 1048576, p.Default)
			assert.Contains(t, p.Constraints, "0..67108864")
		}
	}
	assert.True(t, found, "max_output_bytes is listed")
	assert.NotEmpty(t, d.Outputs)
}

func TestStepsSuggestsAKnownTypeForATypo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("steps", "shel")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `unknown step type "shel" (did you mean "shell"?)`)
	assert.Contains(t, r.stderr, "Try: runbook steps")
}

func TestCallRunsOneStep(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	t.Run("log prints its outputs as JSON and logs to stderr", func(t *testing.T) {
		r := c.run("call", "log", "--with", "message=hi")
		require.Equal(t, 0, r.code, r)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		assert.Equal(t, map[string]any{"message": "hi"}, out)
		assert.Contains(t, r.stderr, "hi")
	})
	t.Run("values parse as JSON when they can, and come from files with @", func(t *testing.T) {
		script := c.file("script.sh", "echo from-file")
		r := c.run("call", "shell", "--with", "command=@"+script, "--with", "parse_json=false", "--with", "allow_exit_codes=[0,3]")
		require.Equal(t, 0, r.code, r)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		assert.Equal(t, "from-file", out["stdout"])
	})
	t.Run("--json gives the params and --with overrides them", func(t *testing.T) {
		r := c.run("call", "set", "--json", `{"a": 1, "b": {"c": true}}`, "--with", "b.d=x", "--output", "text")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "a: 1\nb: {\"c\":true,\"d\":\"x\"}\n", r.stdout)
	})
	t.Run("every params problem is reported with exit 2", func(t *testing.T) {
		r := c.run("call", "log", "--with", "level=loud", "--with", "colour=red")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "with.message")
		assert.Contains(t, r.stderr, "with.level")
		assert.Contains(t, r.stderr, "colour")
		assert.Contains(t, r.stderr, "Try: runbook steps log")
		assert.Empty(t, r.stdout)
	})
	t.Run("a failing step exits with its code", func(t *testing.T) {
		r := c.run("call", "fail", "--with", "message=nope")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "nope")
	})
	t.Run("approvals need a run", func(t *testing.T) {
		r := c.run("call", "approval", "--with", "message=ok?")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "approvals need a run")
	})
}
