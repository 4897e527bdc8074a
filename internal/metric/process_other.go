//go:build unix && !linux

package metric

import (
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
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		s.counter("process_cpu_seconds_total", "Processor time the process spent, user and system, in seconds.", cpu.Seconds())
	}
	collectFDs(s, "/dev/fd")
	s.gauge("process_start_time_seconds", "When the process started (Unix seconds).", float64(started.UnixNano())/1e9)
}
