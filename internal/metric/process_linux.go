package metric

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessCollector gives the process's families, read from /proc:
// process_cpu_seconds_total, process_open_fds, process_max_fds,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_virtual_memory_max_bytes, process_start_time_seconds and
// process_network_{receive,transmit}_bytes_total. A figure that cannot
// be read is left out.
func ProcessCollector() Collector { return processCollector{} }

type processCollector struct{}

// userHZ is the unit of /proc's clock ticks (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

func (processCollector) Collect(s *Scrape) {

	if st, ok := readStat(); ok {
		s.counter("process_cpu_seconds_total", "Processor time the process spent, user and system, in seconds.", float64(st.utime+st.stime)/userHZ)
		s.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize))
		s.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss*uint64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			s.gauge("process_start_time_seconds", "When the process started (Unix seconds).", float64(boot)+float64(st.start)/userHZ)
		}
	}
	collectFDs(s, "/proc/self/fd")
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		s.gauge("process_virtual_memory_max_bytes", "The most virtual memory the process may map (its soft limit; 2^64-1: none).", float64(lim.Cur))
	}
	if in, out, ok := netOctets(); ok {
		s.counter("process_network_receive_bytes_total", "Bytes received over the network by the process's network namespace (IpExt InOctets).", float64(in))
		s.counter("process_network_transmit_bytes_total", "Bytes sent over the network by the process's network namespace (IpExt OutOctets).", float64(out))
	}
}

type procStat struct {
	utime, stime, start, vsize, rss uint64
}

// readStat reads /proc/self/stat's times and sizes.
func readStat() (procStat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields start after the last ')'. Field n (1-based, proc(5)) is
	// f[n-3].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	var st procStat
	for _, p := range []struct {
		to    *uint64
		field int
	}{{&st.utime, 14}, {&st.stime, 15}, {&st.start, 22}, {&st.vsize, 23}, {&st.rss, 24}} {
		n, err := strconv.ParseUint(f[p.field-3], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		*p.to = n
	}
	return st, true
}

// bootTime reads the system's boot time (Unix seconds) from /proc/stat.
func bootTime() (uint64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// netOctets reads the IpExt InOctets and OutOctets of the process's
// network namespace from /proc/self/net/netstat.
func netOctets() (in, out uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, ok1 := strings.CutPrefix(lines[i], "IpExt: ")
		values, ok2 := strings.CutPrefix(lines[i+1], "IpExt: ")
		if !ok1 || !ok2 {
			continue
		}
		ns, vs := strings.Fields(names), strings.Fields(values)
		var gotIn, gotOut bool
		for j := range min(len(ns), len(vs)) {
			n, err := strconv.ParseUint(vs[j], 10, 64)
			if err != nil {
				continue
			}
			switch ns[j] {
			case "InOctets":
				in, gotIn = n, true
			case "OutOctets":
				out, gotOut = n, true
			}
		}
		return in, out, gotIn && gotOut
	}
	return 0, 0, false
}
