package core

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lines asked for while an append syncs go together in the next
// write and sync; a line asked for twice in one group is appended once.
func TestLinesAskedForWhileOneSyncsShareTheNextSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.txt")
	cache := &lineCache{files: map[string]*lineFile{}}
	var syncs atomic.Int32
	syncing, release := make(chan struct{}), make(chan struct{})
	syncFile = func(f *os.File) error {
		if syncs.Add(1) == 1 {
			close(syncing)
			<-release
		}
		return f.Sync()
	}
	t.Cleanup(func() { syncFile = (*os.File).Sync })

	type answer struct {
		line  string
		added bool
		err   error
	}
	answers := make(chan answer, 16)
	ask := func(line string) {
		added, err := cache.ensure(targetIn(path), line)
		answers <- answer{line, added, err}
	}
	go ask("first")
	<-syncing
	lines := []string{"a", "b", "c", "dup", "dup", "e"}
	for _, l := range lines {
		go ask(l)
	}
	lf := cache.get(path)
	require.Eventually(t, func() bool {
		lf.queue.Lock()
		defer lf.queue.Unlock()
		return len(lf.queued) == len(lines)
	}, 10*time.Second, time.Millisecond, "the lines asked for meanwhile wait")
	close(release)

	added := map[string]int{}
	for range len(lines) + 1 {
		a := <-answers
		require.NoError(t, a.err, a.line)
		if a.added {
			added[a.line]++
		}
	}
	assert.Equal(t, map[string]int{"first": 1, "a": 1, "b": 1, "c": 1, "dup": 1, "e": 1}, added)
	assert.Equal(t, int32(2), syncs.Load(), "one sync for the first line, one for the group after it")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	assert.Equal(t, "first", got[0])
	assert.ElementsMatch(t, []string{"first", "a", "b", "c", "dup", "e"}, got)
}

// A failed sync is the line's error, and the next ask reads the
// file again rather than trust what it thought it held.
func TestAFailedSyncFailsAndTheFileIsReadAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.txt")
	cache := &lineCache{files: map[string]*lineFile{}}
	syncFile = func(*os.File) error { return fmt.Errorf("disk gone") }
	added, err := cache.ensure(targetIn(path), "a")
	require.ErrorContains(t, err, "disk gone")
	assert.False(t, added)
	syncFile = (*os.File).Sync
	t.Cleanup(func() { syncFile = (*os.File).Sync })
	added, err = cache.ensure(targetIn(path), "a")
	require.NoError(t, err)
	assert.False(t, added, "the line was written before the sync failed: read again, it is there")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a\n", string(b))
}

// A link put in the file's place after its path was checked
// (lineFilePath) is not followed: the append is refused and the link's
// target stays as it was.
func TestAnAppendFollowsNoLinkPutInTheFilesPlace(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(target, []byte("orig\n"), 0o600))
	path := filepath.Join(dir, "n.txt")
	require.NoError(t, os.Symlink(target, path))
	cache := &lineCache{files: map[string]*lineFile{}}
	added, err := cache.ensure(targetIn(path), "x")
	require.Error(t, err)
	assert.False(t, added)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "orig\n", string(b))
}

// A directory of the file's path swapped for a link out of the root after
// the path was checked is not followed either: the append goes through
// the root (os.Root) and creates nothing outside it.
func TestAnAppendFollowsNoDirectorySwappedForALink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o700))
	file := lineTarget{root: root, rel: filepath.Join("d", "n.txt")} // as lineFilePath checked it
	require.NoError(t, os.Remove(filepath.Join(root, "d")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "d")))
	cache := &lineCache{files: map[string]*lineFile{}}
	added, err := cache.ensure(file, "x")
	require.Error(t, err)
	assert.False(t, added)
	_, err = os.Stat(filepath.Join(outside, "n.txt"))
	assert.True(t, os.IsNotExist(err), "nothing created outside the root: %v", err)
}

// targetIn is the line file at path as lineFilePath returns it, with its
// own directory as the root.
func targetIn(path string) lineTarget {
	return lineTarget{root: filepath.Dir(path), rel: filepath.Base(path)}
}
