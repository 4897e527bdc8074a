//go:build !unix

package metric

import "time"

// ProcessCollector gives process_start_time_seconds only on systems that
// are not Unix: the time this package was initialised.
func ProcessCollector() Collector { return processCollector{} }

type processCollector struct{}

var started = time.Now()

func (processCollector) Collect(s *Scrape) {
	s.gauge("process_start_time_seconds", "When the process started (Unix seconds).", float64(started.UnixNano())/1e9)
}
