package sim

import (
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Fault is an injected failure or delay for matching calls.
type Fault struct {
	Service    string        `json:"service,omitempty"`     // "" any
	Method     string        `json:"method,omitempty"`      // "" any
	PathPrefix string        `json:"path_prefix,omitempty"` // "" any
	Status     int           `json:"status,omitempty"`      // 429, 500, 503...; 0: delay only
	Latency    time.Duration `json:"latency,omitempty"`     // real time added before answering
	Rate       float64       `json:"rate,omitempty"`        // probability per call (0: always)
	Count      int           `json:"count,omitempty"`       // calls it applies to (0: unlimited)
	RetryAfter int           `json:"retry_after,omitempty"` // seconds, for 429/503
}

// Faults holds the injected faults.
type Faults struct {
	mu     sync.Mutex
	faults []*Fault
}

// Add injects a fault.
func (f *Faults) Add(ft Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &ft)
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// match returns the latency and status to apply to a call (zero: none).
func (f *Faults) match(service, method, path string) (time.Duration, *Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var latency time.Duration
	var hit *Fault
	for i := 0; i < len(f.faults); i++ {
		ft := f.faults[i]
		if (ft.Service != "" && ft.Service != service) || (ft.Method != "" && !strings.EqualFold(ft.Method, method)) ||
			!strings.HasPrefix(path, ft.PathPrefix) {
			continue
		}
		if ft.Rate > 0 && rand.Float64() >= ft.Rate {
			continue
		}
		latency += ft.Latency
		if ft.Status != 0 && hit == nil {
			c := *ft
			hit = &c
		}
		if ft.Count > 0 {
			ft.Count--
			if ft.Count == 0 {
				f.faults = append(f.faults[:i], f.faults[i+1:]...)
				i--
			}
		}
	}
	return latency, hit
}
