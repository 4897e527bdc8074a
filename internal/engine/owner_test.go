//go:build unix

package engine_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.Interrupted(tc.st, tc.r, tc.executing))
		})
	}
}
