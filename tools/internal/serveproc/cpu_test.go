package serveproc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary a helper process (TestMain): "burn"
// uses 100 ms of processor time and exits, "burn-sleep" then sleeps,
// "parent" starts a burn, waits for it, starts a burn-sleep and sleeps.
const helperEnv = "SERVEPROC_CPU_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "burn":
		burn(100 * time.Millisecond)
	case "burn-sleep":
		burn(100 * time.Millisecond)
		time.Sleep(time.Minute)
	case "parent":
		_ = helper("burn").Run()
		_ = helper("burn-sleep").Start()
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func helper(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// burn spins until this process has used d of processor time.
func burn(d time.Duration) {
	for start := SelfCPU(); SelfCPU()-start < d; {
		for i := 0; i < 1e5; i++ {
		}
	}
}

func TestStatFieldsAreCountedFromTheLastParenthesis(t *testing.T) {
	line := "4242 (a) (b c) S 17 4242 4242 0 -1 4194560 1 0 0 0 250 31 7 2 20 0 1 0 100 0 0\n"
	st, err := parseStat([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, procStat{comm: "a) (b c", ppid: 17, utime: 250, stime: 31, cutime: 7, cstime: 2}, st)

	_, err = parseStat([]byte("4242 (a) S 17"))
	assert.Error(t, err, "a short line")
	_, err = parseStat([]byte("no parentheses"))
	assert.Error(t, err)
}

// A process's own time leaves its children out; with children it counts
// the one it waited for and the one alive.
func TestCPUCountsAProcessWithItsReapedAndLiveChildren(t *testing.T) {
	cmd := helper("parent")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})

	// Each child uses 100 ms; the ticks are 10 ms each.
	var own, all time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		own, err = CPU(cmd.Process.Pid, false)
		require.NoError(t, err)
		all, err = CPU(cmd.Process.Pid, true)
		require.NoError(t, err)
		if all-own >= 180*time.Millisecond {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, all-own, 180*time.Millisecond, "both children's time (own %s, with children %s)", own, all)
	assert.Less(t, own, 100*time.Millisecond, "the parent itself only waits")

	_, err := CPU(1<<30, false)
	assert.Error(t, err, "no such process")
}

func TestSelfCPUIsThisProcesssTime(t *testing.T) {
	// Spin until /proc says 50 ms of processor time went by: a wall-clock
	// spin gets only a few ticks on a busy machine.
	start := SelfCPU()
	from, err := CPU(os.Getpid(), false)
	require.NoError(t, err)
	stat := from
	for deadline := time.Now().Add(30 * time.Second); stat-from < 50*time.Millisecond && time.Now().Before(deadline); {
		for until := time.Now().Add(5 * time.Millisecond); time.Now().Before(until); {
		}
		stat, err = CPU(os.Getpid(), false)
		require.NoError(t, err)
	}
	self := SelfCPU()
	assert.GreaterOrEqual(t, self-start, 30*time.Millisecond, "/proc counted %s of spinning", stat-from)
	assert.InDelta(t, float64(self), float64(stat), float64(30*time.Millisecond), "getrusage and /proc agree within ticks")
}

func TestAUseIsDividedAmongRunsAndBoundsTheirRate(t *testing.T) {
	before := Use{Serve: time.Second, Self: 2 * time.Second, Database: 3 * time.Second}
	after := Use{Serve: 3 * time.Second, Self: 2500 * time.Millisecond, Database: 5 * time.Second}
	used := after.Since(before)
	assert.Equal(t, Use{Serve: 2 * time.Second, Self: 500 * time.Millisecond, Database: 2 * time.Second}, used)

	run := used.Per(1000)
	assert.Equal(t, Use{Serve: 2 * time.Millisecond, Self: 500 * time.Microsecond, Database: 2 * time.Millisecond}, run)
	assert.Equal(t, 4500*time.Microsecond, run.All())
	assert.InDelta(t, 2/0.0045, run.Allows(2), 0.001, "two cores at 4.5 ms a run")

	assert.Zero(t, used.Per(0))
	assert.Zero(t, Use{}.Allows(2))
}

func TestReadUseCountsTheServesAndThisProcess(t *testing.T) {
	cmd := helper("burn-sleep")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var u Use
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if u = ReadUse([]int{cmd.Process.Pid, 1 << 30}, 0); u.Serve >= 90*time.Millisecond {
			break
		}
	}
	assert.GreaterOrEqual(t, u.Serve, 90*time.Millisecond, "the helper's 100 ms; a process that is gone counts nothing")
	assert.Positive(t, u.Self)
	assert.Zero(t, u.Database, "no database")
}
