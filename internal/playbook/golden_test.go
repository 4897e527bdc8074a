package playbook

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/runbook/runbook/internal/steps/all"
)

var update = flag.Bool("update", false, "rewrite golden files and schema/playbook.schema.json")

// TestBadPlaybooks loads every testdata/bad/*.yaml and compares the
// diagnostics with its .golden file (go test -update rewrites them).
func TestBadPlaybooks(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 25)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			pb, err := Parse("bad/"+filepath.Base(f), src, LoadOptions{})
			require.Error(t, err, "a bad playbook must not load")
			assert.Nil(t, pb)
			var ds Diagnostics
			require.True(t, errors.As(err, &ds), "error is %T, want Diagnostics", err)
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "missing golden file: run go test ./internal/playbook -update")
			assert.Equal(t, string(want), got)
		})
	}
}

// TestGoodPlaybooks loads every testdata/good/*.yaml without a diagnostic.
func TestGoodPlaybooks(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			pb, err := Load(f, LoadOptions{})
			require.NoError(t, err)
			assert.Equal(t, 1, pb.Version)
			assert.NotEmpty(t, pb.Steps)
		})
	}
}
