//go:build unix

package engine_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// shared hides the store's Exclusive, as a database shared by several
// processes has none.
type shared struct{ state.Store }

func TestInterruptedIsDecidedByTheOwnersLockNotByTime(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer st.Close()
	host, _ := os.Hostname()
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	deadPID := gone.Process.Pid
	self := fmt.Sprintf("%s/%d", host, os.Getpid())
	parent := fmt.Sprintf("%s/%d", host, os.Getppid())
	run := func(status state.RunStatus, owner string) *state.Run {
		return &state.Run{ID: "r", Status: status, Owner: owner, StartedAt: time.Now().Add(-time.Hour)}
	}
	for _, tc := range []struct {
		name      string
		st        state.Store
		r         *state.Run
		executing func(string) bool
		want      bool
	}{
		{"a running run in a file this process holds is interrupted", st, run(state.RunRunning, "other/1"), nil, true},
		{"a run this process executes is not", st, run(state.RunRunning, self), func(string) bool { return true }, false},
		{"a waiting run is not", st, run(state.RunWaiting, "other/1"), nil, false},
		{"a shared store's run whose local process is gone is interrupted", shared{st}, run(state.RunRunning, fmt.Sprintf("%s/%d", host, deadPID)), nil, true},
		{"a shared store's run whose local process lives is running", shared{st}, run(state.RunRunning, parent), nil, false},
		{"a shared store's run of another host cannot be told", shared{st}, run(state.RunRunning, "another-host/1"), nil, false},
		{"a shared store's run of this process is running", shared{st}, run(state.RunRunning, self), nil, false},
		{"a shared store's run of this process named with its start is running", shared{st}, run(state.RunRunning, engine.New(engine.Options{Store: st}).Process()), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.Interrupted(tc.st, tc.r, tc.executing))
		})
	}
}

// A pid is reused, a process's start never is: an owner named with its
// start ("host/pid@start") is gone once the process that has its pid
// started at another moment, this process included.
func TestAnOwnerWhosePIDWasReusedIsGone(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: owners are named by pid alone")
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer st.Close()
	self := engine.New(engine.Options{Store: st}).Process()
	require.Contains(t, self, "@", "this process is named with its start")
	host, _ := os.Hostname()
	parent := fmt.Sprintf("%s/%d", host, os.Getppid())
	run := func(owner string) *state.Run {
		return &state.Run{ID: "r", Status: state.RunRunning, Owner: owner, StartedAt: time.Now().Add(-time.Hour)}
	}
	for _, tc := range []struct {
		name  string
		owner string
		want  bool
	}{
		{"an earlier process with this process's pid is gone", self[:strings.LastIndexByte(self, '@')] + "@1", true},
		{"a live process named with its start is running", engine.New(engine.Options{Store: st}).Process(), false},
		{"a live process with another start is gone", parent + "@1", true},
		{"a live process named without a start is running", parent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.Interrupted(shared{st}, run(tc.owner), nil))
		})
	}
}
