package notice

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
)

func TestFileNames(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"a plain name is kept", "report.pdf", "report.pdf", ""},
		{"a Korean name is kept", "점검 안내.pdf", "점검 안내.pdf", ""},
		{"a path that climbs out is refused", "../../etc/passwd", "", `refusing file name "../../etc/passwd": it leaves the directory`},
		{"an absolute path is refused", "/etc/passwd", "", "it leaves the directory"},
		{"a backslash path is refused", `..\..\boot.ini`, "", "it leaves the directory"},
		{"dot-dot alone is refused", "..", "", "it leaves the directory"},
		{"control characters are dropped", "a\x00b\nc\x1b.txt", "abc.txt", ""},
		{"leading dots are trimmed (no hidden files)", "..bashrc", "bashrc", ""},
		{"nothing left is refused", "...", "", "nothing is left"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fileName(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.Equal(t, fault.Invalid, fault.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("a long name is capped and keeps its extension", func(t *testing.T) {
		got, err := fileName(strings.Repeat("가", 300) + ".pdf")
		require.NoError(t, err)
		assert.LessOrEqual(t, len(got), maxNameBytes)
		assert.True(t, strings.HasSuffix(got, ".pdf"))
	})
}

func TestWriteAtomicRefusesTooLargeAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	_, _, err = writeAtomicSum(root, "big.bin", bytes.NewReader(make([]byte, 11)), 10, false)
	require.ErrorIs(t, err, errTooLarge)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "neither the file nor its temporary remains")

	n, sum, err := writeAtomicSum(root, "ok.bin", bytes.NewReader([]byte("hello")), 10, false)
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
	assert.Equal(t, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", sum)
	fi, err := os.Stat(filepath.Join(dir, "ok.bin"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	_, _, err = writeAtomicSum(root, "ok.bin", bytes.NewReader([]byte("again")), 10, false)
	require.Error(t, err)
	assert.Equal(t, fault.Conflict, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "overwrite: true")
}

func TestDigestFileAppendsOnceAndNeverLeavesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	p := &digestParams{File: "out/digest.md", FileMode: "append"}
	_, err := writeDigestFile(dir, p, "first")
	require.NoError(t, err)
	_, err = writeDigestFile(dir, p, "second")
	require.NoError(t, err)
	_, err = writeDigestFile(dir, p, "second") // a resumed step repeating its write
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "out", "digest.md"))
	require.NoError(t, err)
	assert.Equal(t, "first\n\nsecond\n", string(got))

	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))
	_, err = writeDigestFile(dir, &digestParams{File: "escape/digest.md", FileMode: "append"}, "x")
	require.Error(t, err, "a symbolic link out of the directory is not followed")
	entries, _ := os.ReadDir(outside)
	assert.Empty(t, entries)

	_, err = writeDigestFile(dir, &digestParams{File: "../digest.md", FileMode: "write"}, "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "it leaves the playbook directory")
}

func TestLongFileNamesKeepAnExtensionOfUpTo20Bytes(t *testing.T) {
	cases := []struct {
		name, ext, want string
	}{
		{"a 20-byte extension is kept", "." + strings.Repeat("e", 19), "." + strings.Repeat("e", 19)},
		{"a 21-byte one is not", "." + strings.Repeat("e", 20), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fileName(strings.Repeat("a", 300) + tc.ext)
			require.NoError(t, err)
			assert.Len(t, got, maxNameBytes)
			if tc.want == "" {
				assert.Equal(t, strings.Repeat("a", maxNameBytes), got)
				return
			}
			assert.True(t, strings.HasSuffix(got, tc.want), got)
			assert.Equal(t, strings.Repeat("a", maxNameBytes-len(tc.want)), strings.TrimSuffix(got, tc.want))
		})
	}
}
