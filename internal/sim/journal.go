package sim

import (
	"strings"
	"sync"
	"time"
)

// maxJournalBody bounds the body bytes kept per call.
const maxJournalBody = 64 << 10

// maxJournal bounds the calls kept (oldest dropped first).
const maxJournal = 100000

// Call is one request a simulator received.
type Call struct {
	Seq     int       `json:"seq"`
	Time    time.Time `json:"time"` // simulated time
	Service string    `json:"service"`
	Method  string    `json:"method"`
	Path    string    `json:"path"` // below the service prefix, e.g. /v1/clusters
	Query   string    `json:"query,omitempty"`
	Body    string    `json:"body,omitempty"`
	Status  int       `json:"status"`
	Fault   string    `json:"fault,omitempty"` // set when an injected fault answered
}

// Journal records the calls every service received.
type Journal struct {
	mu    sync.Mutex
	seq   int
	calls []Call
}

func (j *Journal) add(c Call) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	c.Seq = j.seq
	if len(j.calls) >= maxJournal {
		j.calls = append(j.calls[:0], j.calls[len(j.calls)/2:]...)
	}
	j.calls = append(j.calls, c)
}

// Calls returns the recorded calls matching every non-empty filter:
// service, method, and a path prefix.
func (j *Journal) Calls(service, method, pathPrefix string) []Call {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Call
	for _, c := range j.calls {
		if (service == "" || c.Service == service) && (method == "" || c.Method == method) &&
			strings.HasPrefix(c.Path, pathPrefix) {
			out = append(out, c)
		}
	}
	return out
}

// Reset forgets every call.
func (j *Journal) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = nil
}
