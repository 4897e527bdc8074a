package serveproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// userHZ is the unit of the times in /proc/PID/stat: USER_HZ, 100 a
// second in Linux's user ABI (sysconf(_SC_CLK_TCK)) whatever the kernel's
// own tick.
const userHZ = 100

// CPU returns the processor time, user and system, that process pid has
// used so far. With children, it adds the time of its children: those it
// waited for (reaped) and those alive, one level down (a PostgreSQL
// postmaster with its backends).
func CPU(pid int, children bool) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := st.utime + st.stime
	if children {
		ticks += st.cutime + st.cstime
		live, err := childrenOf(pid)
		if err != nil {
			return 0, err
		}
		for _, c := range live {
			ticks += c.utime + c.stime
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// SelfCPU returns the processor time, user and system, that this process
// has used so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Use is the processor time, user and system, that the parts of a load
// used: the runbook serve processes, this process (the load's senders and
// its polls) and the PostgreSQL server (its backends included; none on
// bbolt). On a machine that runs nothing else, the cores divided by the
// parts' time a run bound the runs a second.
type Use struct{ Serve, Self, Database time.Duration }

// ReadUse reads the processor time that the serve processes, this process
// and the PostgreSQL server whose postmaster is pm (0: none) have used so
// far. A process that is gone counts nothing.
func ReadUse(serves []int, pm int) Use {
	u := Use{Self: SelfCPU()}
	for _, pid := range serves {
		d, _ := CPU(pid, false)
		u.Serve += d
	}
	if pm > 0 {
		u.Database, _ = CPU(pm, true)
	}
	return u
}

// Since is the time used between v and u.
func (u Use) Since(v Use) Use {
	return Use{Serve: u.Serve - v.Serve, Self: u.Self - v.Self, Database: u.Database - v.Database}
}

// Per divides u among n runs.
func (u Use) Per(n int) Use {
	if n <= 0 {
		return Use{}
	}
	d := time.Duration(n)
	return Use{Serve: u.Serve / d, Self: u.Self / d, Database: u.Database / d}
}

// All is the parts' time together.
func (u Use) All() time.Duration { return u.Serve + u.Self + u.Database }

// Allows is the runs a second that cores allow at u a run.
func (u Use) Allows(cores int) float64 {
	if u.All() <= 0 {
		return 0
	}
	return float64(cores) * float64(time.Second) / float64(u.All())
}

// Postmaster returns the process of the PostgreSQL server conn is to:
// the parent of its backend, which must be a postgres process on this
// machine. A server elsewhere is an error.
func Postmaster(ctx context.Context, conn *pgx.Conn) (int, error) {
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, err
	}
	st, err := readStat(backend)
	if err != nil {
		return 0, fmt.Errorf("backend %d is not a process on this machine: %w", backend, err)
	}
	parent, err := readStat(st.ppid)
	if err != nil {
		return 0, err
	}
	if parent.comm != "postgres" {
		return 0, fmt.Errorf("the parent of backend %d is %q, not postgres", backend, parent.comm)
	}
	return st.ppid, nil
}

// procStat is what CPU and Postmaster read of /proc/PID/stat.
type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64 // in USER_HZ ticks
}

// readStat reads /proc/pid/stat. The command name, in parentheses, may
// hold spaces and parentheses: the fields after it are counted from the
// last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("malformed /proc stat line")
	}
	f := strings.Fields(string(b[end+1:])) // f[0] is field 3, state
	if len(f) < 15 {
		return procStat{}, errors.New("short /proc stat line")
	}
	var n [5]int64
	for i, idx := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc stat field %d: %w", idx+3, err)
		}
		n[i] = v
	}
	return procStat{comm: string(b[open+1 : end]), ppid: int(n[0]),
		utime: n[1], stime: n[2], cutime: n[3], cstime: n[4]}, nil
}

// childrenOf returns the live children of pid. A child that exits while
// they are read is left out (its parent then counts it once reaped).
func childrenOf(pid int) ([]procStat, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var out []procStat
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st, err := parseStat(b)
		if err == nil && st.ppid == pid {
			out = append(out, st)
		}
	}
	return out, nil
}
