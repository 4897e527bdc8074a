package expr

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryFunctionIsInThePlaybookGuide fails when a function this package
// registers (or a status function) has no example in docs/playbooks.md.
func TestEveryFunctionIsInThePlaybookGuide(t *testing.T) {
	b, err := os.ReadFile("../../docs/playbooks.md")
	require.NoError(t, err)
	doc := string(b)
	names := keys(funcSpecs)
	for s := range statusFuncs {
		names = append(names, s)
	}
	for _, name := range names {
		assert.True(t, strings.Contains(doc, "`"+name+"(") || strings.Contains(doc, " "+name+"("),
			"docs/playbooks.md does not show %s(): add it to the Functions section", name)
	}
}
