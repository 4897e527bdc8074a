package benche2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// receiver is the loopback HTTP server the dispatch playbook's steps call:
// it notes when the first call of each step of each run arrived (POST
// /a/RUN, POST /b/RUN) and answers 204 at once. A step called again (its
// run taken over while the call was in flight) keeps its first arrival.
type receiver struct {
	URL string
	srv *http.Server

	mu      sync.Mutex
	arrived map[string][2]time.Time // by run: step a's call, step b's
}

func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{URL: "http://" + ln.Addr().String(), arrived: map[string][2]time.Time{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	step, run, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if !ok || (step != "a" && step != "b") {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	t := r.arrived[run]
	i := 0
	if step == "b" {
		i = 1
	}
	if t[i].IsZero() {
		t[i] = at
	}
	r.arrived[run] = t
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// reset forgets every call.
func (r *receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived = map[string][2]time.Time{}
}

// gaps returns, for every run whose two calls arrived, the time from step
// a's call to step b's, and how many runs called only once.
func (r *receiver) gaps() (ds []time.Duration, partial int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.arrived {
		if t[0].IsZero() || t[1].IsZero() {
			partial++
			continue
		}
		ds = append(ds, t[1].Sub(t[0]))
	}
	return ds, partial
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
