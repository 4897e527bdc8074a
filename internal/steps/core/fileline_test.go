package core_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// ensureLine runs file.line in dir (the playbook directory) and returns
// its outputs.
func ensureLine(t *testing.T, dir string, with map[string]any) (steps.Outputs, error) {
	t.Helper()
	d := desc(t, "file.line")
	c := stepstest.NewCall(t, d, with)
	c.Dir = dir
	return d.Run(context.Background(), c)
}

func TestFileLineAppendsALineOnce(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	out, err := ensureLine(t, dir, map[string]any{"path": "lists/numbers.txt", "line": "+821000000001"})
	require.NoError(t, err)
	path := filepath.Join(dir, "lists", "numbers.txt")
	assert.Equal(t, steps.Outputs{"added": true, "path": path}, out)
	out, err = ensureLine(t, dir, map[string]any{"path": "lists/numbers.txt", "line": "+821000000001"})
	require.NoError(t, err)
	assert.Equal(t, false, out["added"], "running it again changes nothing")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "+821000000001\n", string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

func TestFileLineSeesWhatOthersWroteAndKeepsATornLineApart(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "n.txt")
	with := func(line string) map[string]any { return map[string]any{"path": "n.txt", "line": line} }
	_, err := ensureLine(t, dir, with("a"))
	require.NoError(t, err)
	// Another writer appends, the last line without its newline (a crash
	// mid-write): the cache must not hide it.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("c\nd")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for line, added := range map[string]bool{"c": false, "d": false, "a": false} {
		out, err := ensureLine(t, dir, with(line))
		require.NoError(t, err)
		assert.Equal(t, added, out["added"], line)
	}
	out, err := ensureLine(t, dir, with("e"))
	require.NoError(t, err)
	assert.Equal(t, true, out["added"])
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a\nc\nd\ne\n", string(b))
}

func TestFileLineUnderConcurrentRunsWritesEachLineOnce(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	added := map[string]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := fmt.Sprintf("+8210%08d", i%50) // each number four times
			out, err := ensureLine(t, dir, map[string]any{"path": "n.txt", "line": line})
			assert.NoError(t, err)
			if out["added"] == true {
				mu.Lock()
				added[line]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "n.txt"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	sort.Strings(lines)
	require.Len(t, lines, 50, "each number once")
	for _, l := range lines {
		assert.Equal(t, 1, added[l], "%s reported added once", l)
	}
}

func TestFileLineStaysInsideTheAllowedDirectories(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("RUNBOOK_FILE_ROOTS", "")
	dir := t.TempDir()
	outside := t.TempDir()

	_, err := ensureLine(t, dir, map[string]any{"path": "../escape.txt", "line": "x"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "%v", err)
	assert.Contains(t, fmt.Sprint(err), "outside the directories a step may write")
	_, err = ensureLine(t, dir, map[string]any{"path": filepath.Join(outside, "x.txt"), "line": "x"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))

	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	_, err = ensureLine(t, dir, map[string]any{"path": "link/x.txt", "line": "x"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a symlink does not lead out")

	// The file itself a link out of the roots: refused, the target as it was.
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("orig\n"), 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "list.txt")))
	_, err = ensureLine(t, dir, map[string]any{"path": "list.txt", "line": "x"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a link as the file does not lead out: %v", err)
	realSecret, err2 := filepath.EvalSymlinks(secret)
	require.NoError(t, err2)
	assert.Contains(t, fmt.Sprint(err), "(a link to "+realSecret+") is outside the directories a step may write")
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "orig\n", string(b))
	// A link to a file inside the roots is followed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kept.txt"), nil, 0o600))
	require.NoError(t, os.Symlink("kept.txt", filepath.Join(dir, "current.txt")))
	out, err := ensureLine(t, dir, map[string]any{"path": "current.txt", "line": "x"})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "kept.txt"), out["path"])

	out, err = ensureLine(t, dir, map[string]any{"path": "sms.txt", "base": "state", "line": "x"})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(state, "runbook", "sms.txt"), out["path"])

	t.Setenv("RUNBOOK_FILE_ROOTS", outside)
	out, err = ensureLine(t, dir, map[string]any{"path": filepath.Join(outside, "x.txt"), "line": "x"})
	require.NoError(t, err, "a root named in RUNBOOK_FILE_ROOTS is allowed")
	assert.Equal(t, true, out["added"])
}

func TestFileLineRefusesALineWithANewline(t *testing.T) {
	ps := desc(t, "file.line").CheckLiteral(map[string]any{"path": "n.txt", "line": "a\nb"})
	require.Len(t, ps, 1)
	assert.Equal(t, "line: must be one line (it holds a newline)", ps[0].Error())
}
