//go:build unix && !linux

package metric

import (
	"os"
	"syscall"
	"time"
)

// ProcessCollector gives, outside Linux, what the system reports without
// /proc: process_cpu_seconds_total (getrusage), process_open_fds (the
// entries of /dev/fd), process_max_fds (the soft limit) and
// process_start_time_seconds (the time this package was initialised, the
// process's start within a few milliseconds). The memory families are
// read from Linux's /proc and are left out here.
func ProcessCollector() Collector { return processCollector{} }

type processCollector struct{}

var started = time.Now()

func (processCollector) Collect(s *Scrape) {
	gauge := func(name, help string, f float64) { s.Value(&Desc{Name: name, Help: help, Type: GaugeType}, f) }
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		s.Value(&Desc{Name: "process_cpu_seconds_total", Help: "Processor time the process spent, user and system, in seconds.", Type: CounterType}, cpu.Seconds())
	}
	if f, err := os.Open("/dev/fd"); err == nil {
		names, err := f.Readdirnames(-1)
		f.Close()
		if err == nil {
			gauge("process_open_fds", "Open file descriptors.", float64(len(names)-1)) // less the one reading the directory
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		gauge("process_max_fds", "The most file descriptors the process may open (its soft limit).", float64(lim.Cur))
	}
	gauge("process_start_time_seconds", "When the process started (Unix seconds).", float64(started.UnixNano())/1e9)
}
