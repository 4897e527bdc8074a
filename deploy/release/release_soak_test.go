//go:build soak

package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeReleaseReproducesByteForByte clones the commit twice into
// directories of different names, runs make release in each with a build
// cache of its own, and compares: the same four binaries (linux and
// darwin, amd64 and arm64, static) and the same SHA256SUMS.
func TestMakeReleaseReproducesByteForByte(t *testing.T) {
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	commit := strings.TrimSpace(string(head))
	var sums []string
	for _, name := range []string{"first", "second-clone"} {
		dir := filepath.Join(t.TempDir(), name)
		out, err := exec.Command("git", "clone", "-q", "../..", dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command("git", "-C", dir, "checkout", "-q", commit).CombinedOutput()
		require.NoError(t, err, "%s", out)
		cmd := exec.Command("make", "release")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOCACHE="+filepath.Join(t.TempDir(), "gocache"))
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "make release:\n%s", out)
		b, err := os.ReadFile(filepath.Join(dir, "dist", "SHA256SUMS"))
		require.NoError(t, err)
		sums = append(sums, string(b))
		t.Logf("%s:\n%s", name, b)
	}
	assert.Equal(t, sums[0], sums[1])
	lines := strings.Split(strings.TrimSpace(sums[0]), "\n")
	assert.Len(t, lines, 4)
	for _, p := range []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"} {
		assert.Contains(t, sums[0], "-"+p+"\n", p)
	}
}
