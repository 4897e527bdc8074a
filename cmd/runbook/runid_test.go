package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uniquePrefix returns the shortest prefix of id that no other ID starts
// with.
func uniquePrefix(t *testing.T, id string, others ...string) string {
	t.Helper()
	for n := 1; n < len(id); n++ {
		p := id[:n]
		taken := false
		for _, o := range others {
			if o != id && strings.HasPrefix(o, p) {
				taken = true
			}
		}
		if !taken {
			return p
		}
	}
	t.Fatalf("no prefix of %s shorter than the ID is unique among %v", id, others)
	return ""
}

// candidates returns the run IDs an ambiguous prefix's error lists.
func candidates(stderr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  (\d{8}T\d{6}-[0-9a-f]{6})  `).FindAllStringSubmatch(stderr, -1) {
		out = append(out, m[1])
	}
	return out
}

// commonPrefix returns the longest prefix every ID shares.
func commonPrefix(ids ...string) string {
	p := ids[0]
	for _, id := range ids[1:] {
		for !strings.HasPrefix(id, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

func TestRunsVerbsTakeAUniquePrefixOfARunID(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hello := c.file("hello.yaml", helloPlaybook)
	var ids []string
	for range 11 {
		ids = append(ids, runIDOf(t, c.run("run", hello).stdout))
	}
	bad := runIDOf(t, c.run("run", c.file("breaks.yaml", failingPlaybook)).stdout)
	gated := c.file("gated.yaml", approvalPlaybook)
	toApprove := runIDOf(t, c.run("run", gated).stdout)
	toCancel := runIDOf(t, c.run("run", gated).stdout)
	all := append(ids, bad, toApprove, toCancel)
	short := func(id string) string { return uniquePrefix(t, id, all...) }

	t.Run("show and logs print what they print for the whole ID", func(t *testing.T) {
		for _, verb := range []string{"show", "logs"} {
			whole := c.run("runs", verb, bad)
			require.Equal(t, 0, whole.code, whole)
			r := c.run("runs", verb, short(bad))
			assert.Equal(t, 0, r.code, r)
			assert.Equal(t, whole.stdout, r.stdout, verb)
		}
	})
	t.Run("approve answers the run the prefix names", func(t *testing.T) {
		r := c.run("runs", "approve", short(toApprove), "gate", "--field", "ticket=7")
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "run "+toApprove+" succeeded in")
	})
	t.Run("cancel cancels the run the prefix names", func(t *testing.T) {
		r := c.run("runs", "cancel", short(toCancel))
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, "run "+toCancel+" cancelled\n", r.stdout)
	})
	t.Run("retry retries the run the prefix names", func(t *testing.T) {
		r := c.run("runs", "retry", short(bad), "--output", "json")
		assert.Equal(t, 1, r.code, "the step fails again: %s", r)
		var doc runDocument
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r)
		assert.Equal(t, bad, doc.Run.RetryOf)
		all = append(all, doc.Run.ID) // later prefixes must be unique among the retry too
	})
	t.Run("an ambiguous prefix is a usage error listing the candidates", func(t *testing.T) {
		p := commonPrefix(ids[0], ids[1])
		r := c.run("runs", "show", p)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "ambiguous")
		listed := candidates(r.stderr)
		assert.GreaterOrEqual(t, len(listed), 2, r.stderr)
		for _, id := range listed {
			assert.True(t, strings.HasPrefix(id, p), "%s does not start with %s", id, p)
		}
		assert.Empty(t, r.stdout)
	})
	t.Run("at most ten candidates are listed", func(t *testing.T) {
		r := c.run("runs", "show", commonPrefix(all...))
		assert.Equal(t, 2, r.code, r)
		assert.Len(t, candidates(r.stderr), 10, r.stderr)
		assert.Contains(t, r.stderr, "…")
	})
	t.Run("a prefix of no run is not found", func(t *testing.T) {
		r := c.run("runs", "show", "1999")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, `no run "1999"`)
	})

	t.Run("through a running server", func(t *testing.T) {
		fromFile := c.run("runs", "show", bad)
		require.Equal(t, 0, fromFile.code, fromFile)
		c.writePlaybooks(t)
		c.serveRuns(t)
		r := c.run("runs", "show", short(bad))
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, fromFile.stdout, r.stdout)
		r = c.run("runs", "logs", commonPrefix(ids[0], ids[1]))
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "ambiguous")
		assert.GreaterOrEqual(t, len(candidates(r.stderr)), 2, r.stderr)
	})
}
