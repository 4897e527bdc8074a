package playbook_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/playbook"
	_ "github.com/runbook/runbook/internal/steps/all"
)

// Every playbook users copy (playbooks/) and every walkthrough (examples/)
// loads without a diagnostic and validates against the published schema.
func TestShippedPlaybooksLoadAndMatchTheSchema(t *testing.T) {
	var files []string
	for _, dir := range []string{"../../playbooks", "../../examples"} {
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(dir, pat))
			require.NoError(t, err)
			files = append(files, m...)
		}
	}
	require.NotEmpty(t, files)
	for _, f := range files {
		if filepath.Base(f) == "runbook.yaml" {
			continue // the example config of runbook serve (internal/config tests it)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := playbook.Load(f, playbook.LoadOptions{})
			require.NoError(t, err)
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, playbook.ValidateSchema(src))
		})
	}
}

// The playbook shown in the README loads as written.
func TestReadmePlaybookLoads(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := strings.Split(string(readme), "```yaml\n")
	require.Greater(t, len(blocks), 1, "the README shows a playbook")
	for i, b := range blocks[1:] {
		src, _, ok := strings.Cut(b, "```")
		require.True(t, ok)
		_, err := playbook.Parse(fmt.Sprintf("README.md block %d", i+1), []byte(src), playbook.LoadOptions{})
		require.NoError(t, err)
	}
}
