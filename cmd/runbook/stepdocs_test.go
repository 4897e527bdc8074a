package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/steps"
)

// TestStepDocsAreCurrent regenerates docs/steps into a temporary directory
// and compares: a step type added, renamed or changed without regenerating
// the pages fails here, like a stale schema.
func TestStepDocsAreCurrent(t *testing.T) {
	dir := t.TempDir()
	c := newCLI(t)
	r := c.run("steps", "--markdown", dir)
	require.Equal(t, 0, r.code, r)

	names := func(d string) []string {
		m, err := filepath.Glob(filepath.Join(d, "*.md"))
		require.NoError(t, err)
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		sort.Strings(m)
		return m
	}
	const repo = "../../docs/steps"
	require.Equal(t, names(dir), names(repo), "docs/steps has other pages than the registry makes: run %s", stepDocsCommand)
	for _, name := range names(dir) {
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(repo, name))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "docs/steps/%s is stale: run %s", name, stepDocsCommand)
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestStepDocsDocumentEveryTypeWithAnExampleThatLoads reads the checked-in
// pages as a user would: every registered type has a section, and every
// example in them is a playbook the loader accepts.
func TestStepDocsDocumentEveryTypeWithAnExampleThatLoads(t *testing.T) {
	pages, err := filepath.Glob("../../docs/steps/*.md")
	require.NoError(t, err)
	var all []byte
	examples := 0
	for _, p := range pages {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		all = append(all, b...)
		for i, m := range yamlBlock.FindAllSubmatch(b, -1) {
			examples++
			_, err := playbook.Parse(filepath.Base(p), m[1], playbook.LoadOptions{})
			assert.NoError(t, err, "example %d of %s:\n%s", i+1, p, m[1])
		}
	}
	for _, d := range steps.All() {
		assert.Regexp(t, "(?m)^## "+regexp.QuoteMeta(d.Type)+"\n", string(all), "docs/steps has no section for %s: run %s", d.Type, stepDocsCommand)
	}
	assert.Equal(t, len(steps.All()), examples, "one example per step type")
}
