package playtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/sim"
)

// SinkService is the name calls to the sink carry in the journal and in
// faults and expectations.
const SinkService = "sink"

// sink is the receiver of the posts a playbook makes to URLs of its own
// (chat webhooks, suppression APIs): env.TEST_SINK is its base URL. It
// answers 200 {"ok": true} to anything, unless a fault says otherwise,
// and records every call like the simulators' journal. Each call also
// records how many simulator calls were journaled before it, so that the
// two journals merge into one order.
type sink struct {
	srv   *http.Server
	ln    net.Listener
	url   string
	sim   *sim.Server
	done  chan struct{}
	mu    sync.Mutex
	calls []sinkCall
	fault []*HTTPFault // remaining faults; Count counts down
}

type sinkCall struct {
	call  sim.Call
	after int // Seq of the last simulator call journaled before it
}

func startSink(s *sim.Server) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sink: listen: %w", err)
	}
	k := &sink{ln: ln, url: "http://" + ln.Addr().String(), sim: s, done: make(chan struct{})}
	k.srv = &http.Server{Handler: k, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(k.done)
		_ = k.srv.Serve(ln)
	}()
	return k, nil
}

func (k *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = k.srv.Shutdown(ctx)
	<-k.done
}

// addFault adds a fault for sink calls.
func (k *sink) addFault(f HTTPFault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fault = append(k.fault, &f)
}

// match returns the latency and the fault that answers a call (nil: none),
// counting the call against the faults it matches.
func (k *sink) match(method, path string) (time.Duration, *HTTPFault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var latency time.Duration
	var hit *HTTPFault
	for i := 0; i < len(k.fault); i++ {
		f := k.fault[i]
		if (f.Method != "" && f.Method != method) || !strings.HasPrefix(path, f.Path) {
			continue
		}
		latency += f.Latency
		if f.Status != 0 && hit == nil {
			c := *f
			hit = &c
		}
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				k.fault = append(k.fault[:i], k.fault[i+1:]...)
				i--
			}
		}
	}
	return latency, hit
}

func (k *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	call := sim.Call{Time: k.sim.Clock.Now(), Service: SinkService, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body)}
	latency, f := k.match(r.Method, r.URL.Path)
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	status := http.StatusOK
	if f != nil {
		status, call.Fault = f.Status, fmt.Sprintf("injected %d", f.Status)
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
	}
	call.Status = status
	k.record(call)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if f == nil {
		_, _ = io.WriteString(w, `{"ok":true}`+"\n")
		return
	}
	fmt.Fprintf(w, "{\"error\":%q}\n", http.StatusText(status))
}

// record journals a call with the simulator journal's position.
func (k *sink) record(c sim.Call) {
	after := 0
	if calls := k.sim.Journal.Calls("", "", ""); len(calls) > 0 {
		after = calls[len(calls)-1].Seq
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	c.Seq = len(k.calls) + 1
	k.calls = append(k.calls, sinkCall{call: c, after: after})
}

// journal returns every call, the simulators' and the sink's, in the
// order they were answered, numbered from 1.
func (k *sink) journal() []sim.Call {
	simCalls := k.sim.Journal.Calls("", "", "")
	k.mu.Lock()
	own := append([]sinkCall(nil), k.calls...)
	k.mu.Unlock()
	out := make([]sim.Call, 0, len(simCalls)+len(own))
	j := 0
	for _, c := range simCalls {
		for j < len(own) && own[j].after < c.Seq {
			out = append(out, own[j].call)
			j++
		}
		out = append(out, c)
	}
	for ; j < len(own); j++ {
		out = append(out, own[j].call)
	}
	for i := range out {
		out[i].Seq = i + 1
	}
	return out
}
