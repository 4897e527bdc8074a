package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
)

// TestPlaybookGuideExamplesLoad loads every complete playbook in
// docs/playbooks.md (a ```yaml block starting with version: 1): an example
// the loader refuses teaches the wrong thing.
func TestPlaybookGuideExamplesLoad(t *testing.T) {
	b, err := os.ReadFile("../../docs/playbooks.md")
	require.NoError(t, err)
	n := 0
	for i, m := range yamlBlock.FindAllSubmatch(b, -1) {
		src := m[1]
		if !strings.HasPrefix(string(src), "version: 1\n") {
			continue
		}
		n++
		name := fmt.Sprintf("playbooks.md example %d", i+1)
		_, err := playbook.Parse(name, src, playbook.LoadOptions{})
		assert.NoError(t, err, "%s:\n%s", name, src)
	}
	assert.GreaterOrEqual(t, n, 10, "the guide's examples were found")
}

// TestTheGuidesSeveralStepsPerItemPatternsRun runs the two patterns
// docs/playbooks.md gives for several steps per for_each item, as written:
// each cluster is resized, then posted.
func TestTheGuidesSeveralStepsPerItemPatternsRun(t *testing.T) {
	b, err := os.ReadFile("../../docs/playbooks.md")
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range yamlBlock.FindAllSubmatch(b, -1) {
		src := string(m[1])
		for _, name := range []string{"per-cluster", "each-cluster", "two-loops"} {
			if strings.Contains(src, "\nname: "+name+"\n") {
				blocks[name] = strings.TrimPrefix(src, "# per-cluster.yaml\n")
			}
		}
	}
	require.Len(t, blocks, 3, "the guide's blocks were found")
	c := newCLI(t)
	c.file("per-cluster.yaml", blocks["per-cluster"])

	r := c.run("run", c.file("each-cluster.yaml", blocks["each-cluster"]))
	require.Equal(t, 0, r.code, r)
	for _, cl := range []string{"prod-1", "prod-2"} {
		resize, post := strings.Index(r.stdout, "resize: resize "+cl), strings.Index(r.stdout, "post: post "+cl)
		assert.True(t, resize >= 0 && post > resize, "%s resized, then posted:\n%s", cl, r.stdout)
	}

	r = c.run("run", c.file("two-loops.yaml", blocks["two-loops"]))
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "post[0]: post prod-1: 3 nodes")
	assert.Contains(t, r.stdout, "post[1]: post prod-2: 3 nodes")
}
