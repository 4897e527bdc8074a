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
