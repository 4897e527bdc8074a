package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallDisk returns a directory on a 5 MB tmpfs, unmounted when t ends.
// Where mounting is refused (not root, no CAP_SYS_ADMIN), it returns an
// ordinary directory and a limit for the binary's files instead
// (RLIMIT_FSIZE, through the shell's ulimit): the state file then cannot
// grow past 5 MB either, so the test never skips.
func smallDisk(t *testing.T) (dir string, limited bool) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "disk")
	require.NoError(t, os.Mkdir(dir, 0o700))
	unmount, err := mountSmallTmpfs(dir)
	if err != nil {
		t.Logf("tmpfs refused (%v): limiting the file size of the binary instead", err)
		return dir, true
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir, false
}

// A run on a full disk: its state file on a 5 MB tmpfs, its shell step
// prints about 100 MB. The run is not succeeded: runbook run exits
// non-zero and says on stderr that the run's state could not be written
// and why; nothing after the step runs; and the file stays readable
// (runs list and runs show work, and say the run failed when that was
// recorded).
func TestARunWhoseStateCannotBeWrittenFailsAndSaysWhy(t *testing.T) {
	c := newCLI(t)
	disk, limited := smallDisk(t)
	c.env = append(c.env, "RUNBOOK_STATE="+filepath.Join(disk, "state.db"))
	marker := filepath.Join(c.dir, "after")
	pb := c.file("loud.yaml", `version: 1
name: loud
steps:
  - id: loud
    uses: shell
    with: {command: "yes 'a line of output that fills the disk quickly, about a hundred bytes long, again and again' | head -c 100000000"}
  - {id: after, uses: shell, with: {command: "touch `+marker+`"}}
`)
	var r result
	if limited {
		r = c.runLimited(5<<20, "run", pb)
	} else {
		r = c.run("run", pb)
	}
	t.Logf("exit %d\n--- stderr\n%s", r.code, r.stderr)
	assert.NotEqual(t, 0, r.code, "runbook run must fail")
	assert.Contains(t, r.stderr, "the run's state could not be written", "it says why")
	assert.Regexp(t, `no space left on device|file too large`, r.stderr, "and names the cause")
	assert.NoFileExists(t, marker, "nothing runs after the step whose record could not be written")
	assert.LessOrEqual(t, strings.Count(r.stderr, "step output not stored"), 1, "the output lines refused are logged once, then counted")

	list := c.run("runs", "list")
	require.Equal(t, 0, list.code, "the state file stays readable: %s", list)
	assert.Contains(t, list.stdout, "loud")
	assert.NotContains(t, list.stdout, "succeeded", "the run is not succeeded: %s", list.stdout)
	id := runIDOf(t, r.stdout+r.stderr)
	show := c.run("runs", "show", id)
	require.Equal(t, 0, show.code, "the state file stays readable: %s", show)
	assert.NotContains(t, strings.ToLower(show.stdout), "succeeded", "%s", show.stdout)
}

// runLimited is run with the binary's files limited to limit bytes
// (RLIMIT_FSIZE).
func (c *cli) runLimited(limit int, args ...string) result {
	c.t.Helper()
	sh := []string{"-c", `ulimit -f ` + strconv.Itoa(limit/512) + ` && exec "$0" "$@"`, bin}
	return c.runCmd(exec.Command("/bin/sh", append(sh, args...)...))
}
