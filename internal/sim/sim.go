package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Service is one simulated API.
type Service interface {
	// Handler serves the API's paths, relative to the service prefix
	// (a request for http://host/nks/v1/clusters reaches it as /v1/clusters).
	Handler() http.Handler
	// Connection returns the settings a runbook connection needs to reach
	// this simulator at baseURL: "base_url" plus the credentials the
	// simulator accepts.
	Connection(baseURL string) map[string]any
}

// ExactPaths is implemented by a service whose paths carry data that may
// end in "/" (object storage: an object name "logs/" is not the container
// listing). The server hands such a service every path exactly as sent;
// every other service sees a path without its trailing slashes, so
// GET /v1/clusters/ reaches the route of GET /v1/clusters, as on the
// Pecan-based services public clients are written against.
type ExactPaths interface {
	ExactPaths()
}

// Env is what a service gets from the server it runs in.
type Env struct {
	Clock   *Clock
	Journal *Journal
	Faults  *Faults
	// Seed makes generated data (notices, UUIDs) reproducible.
	Seed uint64
	// URL returns the base URL of a service of the same server ("" if not
	// running), for services that link to others.
	URL func(service string) string
}

// Factory creates a service.
type Factory func(env *Env) (Service, error)

var (
	regMu     sync.Mutex
	factories = map[string]Factory{}
)

// Register adds a service factory under name (the URL prefix and the
// connection name). It panics on an empty or duplicate name.
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if name == "" || strings.ContainsAny(name, "/ ") {
		panic(fmt.Sprintf("sim: invalid service name %q", name))
	}
	if _, dup := factories[name]; dup {
		panic(fmt.Sprintf("sim: duplicate service %q", name))
	}
	factories[name] = f
}

// Names lists the registered services, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Options configure a Server.
type Options struct {
	Addr     string  // listen address (default 127.0.0.1:0)
	Speed    float64 // simulated seconds per real second (default 1)
	Start    time.Time
	Seed     uint64   // default 1
	Services []string // default: every registered service
}

// Server runs the simulators.
type Server struct {
	Clock   *Clock
	Journal *Journal
	Faults  *Faults

	ln       net.Listener
	srv      *http.Server
	base     string
	services map[string]Service
	done     chan struct{}
}

// Start listens and serves every selected service until Close or ctx ends.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	names := o.Services
	if len(names) == 0 {
		names = Names()
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("simulator: listen on %s: %w", o.Addr, err)
	}
	s := &Server{
		Clock: NewClock(o.Start, o.Speed), Journal: &Journal{}, Faults: &Faults{},
		ln: ln, base: "http://" + ln.Addr().String(), services: map[string]Service{}, done: make(chan struct{}),
	}
	env := &Env{Clock: s.Clock, Journal: s.Journal, Faults: s.Faults, Seed: o.Seed, URL: s.URL}
	mux := http.NewServeMux()
	for _, name := range names {
		regMu.Lock()
		f, ok := factories[name]
		regMu.Unlock()
		if !ok {
			ln.Close()
			return nil, fmt.Errorf("simulator: no service %q (have: %s)", name, strings.Join(Names(), ", "))
		}
		svc, err := f(env)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("simulator: start %s: %w", name, err)
		}
		s.services[name] = svc
		_, exact := svc.(ExactPaths)
		mux.Handle("/"+name+"/", http.StripPrefix("/"+name, s.middleware(name, svc.Handler(), !exact)))
	}
	mux.HandleFunc("/_sim/", s.admin)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL returns the base URL of a running service ("" if not running).
func (s *Server) URL(service string) string {
	if _, ok := s.services[service]; !ok {
		return ""
	}
	return s.base + "/" + service
}

// Addr returns the listen address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Connections returns, per service, the connection settings that reach it.
func (s *Server) Connections() map[string]map[string]any {
	out := make(map[string]map[string]any, len(s.services))
	for name, svc := range s.services {
		out[name] = svc.Connection(s.URL(name))
	}
	return out
}

// Service returns a running service (for tests that drive its admin API
// in-process).
func (s *Server) Service(name string) Service { return s.services[name] }

// Close stops the server.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

// MaxRequestBody is the largest request body a simulator accepts (413
// above): they hold what they receive in memory.
const MaxRequestBody = 32 << 20

// middleware journals every call and applies injected faults. With trim
// set, the service and the fault rules see the path without trailing
// slashes; the journal keeps the path as the client sent it.
func (s *Server) middleware(service string, next http.Handler, trim bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBody+1))
		call := Call{Time: s.Clock.Now(), Service: service, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
		if err == nil && len(body) > MaxRequestBody {
			// The simulators keep everything in memory: a larger body is
			// refused whole rather than cut.
			WriteJSON(w, http.StatusRequestEntityTooLarge, map[string]string{
				"error": fmt.Sprintf("request body over the simulator's %d MiB limit", MaxRequestBody>>20)})
			call.Status, call.Body = http.StatusRequestEntityTooLarge, string(body[:maxJournalBody])
			s.Journal.add(call)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > maxJournalBody {
			body = body[:maxJournalBody]
		}
		call.Body = string(body)
		if trim {
			r = trimTrailingSlash(r)
		}
		admin := strings.HasPrefix(r.URL.Path, "/_admin/")
		if !admin {
			latency, ft := s.Faults.match(service, r.Method, r.URL.Path)
			if latency > 0 {
				select {
				case <-time.After(latency):
				case <-r.Context().Done():
					return
				}
			}
			if ft != nil {
				if ft.RetryAfter > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(ft.RetryAfter))
				}
				http.Error(w, http.StatusText(ft.Status), ft.Status)
				call.Status, call.Fault = ft.Status, fmt.Sprintf("injected %d", ft.Status)
				s.Journal.add(call)
				return
			}
		}
		// The call is journaled as its status is written, before any byte
		// of the answer leaves: a client that has its answer finds the call
		// in the journal.
		rec := &statusWriter{ResponseWriter: w, onStatus: func(status int) {
			if !admin {
				call.Status = status
				s.Journal.add(call)
			}
		}}
		next.ServeHTTP(rec, r)
		if !rec.wrote {
			rec.WriteHeader(http.StatusOK)
		}
	})
}

// trimTrailingSlash returns r with its path's trailing slashes removed
// (a shallow copy; r itself is unchanged). The root path stays "/".
func trimTrailingSlash(r *http.Request) *http.Request {
	p := strings.TrimRight(r.URL.Path, "/")
	if p == r.URL.Path || p == "" {
		return r
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = p
	u.RawPath = strings.TrimRight(r.URL.RawPath, "/")
	r2.URL = &u
	return r2
}

// statusWriter reports the status of an answer once, before writing it.
type statusWriter struct {
	http.ResponseWriter
	onStatus func(status int)
	wrote    bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.onStatus(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// admin serves /_sim/connections (GET: the connection settings of every
// service, what `runbook run --sim-url` reads), /_sim/journal (GET, ?service=&method=&path=; DELETE resets),
// /_sim/faults (GET lists nothing; POST adds one; DELETE clears) and
// /_sim/clock (GET; POST {"advance": "1h"}).
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_sim/connections" && r.Method == http.MethodGet:
		WriteJSON(w, http.StatusOK, s.Connections())
	case r.URL.Path == "/_sim/journal" && r.Method == http.MethodGet:
		q := r.URL.Query()
		WriteJSON(w, http.StatusOK, s.Journal.Calls(q.Get("service"), q.Get("method"), q.Get("path")))
	case r.URL.Path == "/_sim/journal" && r.Method == http.MethodDelete:
		s.Journal.Reset()
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_sim/faults" && r.Method == http.MethodPost:
		var f struct {
			Fault
			Latency string `json:"latency"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&f); err != nil {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "bad fault: " + err.Error()})
			return
		}
		if f.Latency != "" {
			d, err := time.ParseDuration(f.Latency)
			if err != nil {
				WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "bad latency: " + err.Error()})
				return
			}
			f.Fault.Latency = d
		}
		s.Faults.Add(f.Fault)
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_sim/faults" && r.Method == http.MethodDelete:
		s.Faults.Clear()
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_sim/clock" && r.Method == http.MethodGet:
		WriteJSON(w, http.StatusOK, map[string]any{"now": s.Clock.Now(), "speed": s.Clock.Speed()})
	case r.URL.Path == "/_sim/clock" && r.Method == http.MethodPost:
		var body struct {
			Advance string `json:"advance"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		d, err := time.ParseDuration(body.Advance)
		if err != nil || d < 0 {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": errors.Join(errors.New("advance must be a positive duration like 10m"), err).Error()})
			return
		}
		s.Clock.Advance(d)
		WriteJSON(w, http.StatusOK, map[string]any{"now": s.Clock.Now()})
	default:
		WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no simulator admin route " + r.Method + " " + r.URL.Path})
	}
}

// WriteJSON answers v as JSON with status: the answer of the simulator's
// admin routes and of the services that send plain application/json.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
