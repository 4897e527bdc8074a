//go:build !linux

package metric

import "time"

// ProcessCollector gives process_start_time_seconds outside Linux: the
// time this package was initialised, the process's start within a few
// milliseconds. The other process_* families are read from Linux's /proc
// and are left out here.
func ProcessCollector() Collector { return processCollector{} }

type processCollector struct{}

var started = time.Now()

func (processCollector) Collect(s *Scrape) {
	s.Value(&Desc{Name: "process_start_time_seconds", Help: "When the process started (Unix seconds).", Type: GaugeType},
		float64(started.UnixNano())/1e9)
}
