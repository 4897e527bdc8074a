//go:build unix

package metric

import (
	"os"
	"syscall"
)

// collectFDs gives process_open_fds, the entries of dir (the process's
// descriptors: /proc/self/fd, /dev/fd), and process_max_fds, the soft
// limit.
func collectFDs(s *Scrape, dir string) {
	if f, err := os.Open(dir); err == nil {
		names, err := f.Readdirnames(-1)
		f.Close()
		if err == nil {
			s.gauge("process_open_fds", "Open file descriptors.", float64(len(names)-1)) // less the one reading the directory
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		s.gauge("process_max_fds", "The most file descriptors the process may open (its soft limit).", float64(lim.Cur))
	}
}
