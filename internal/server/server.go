// Package server is `runbook serve`: it loads a directory of playbooks,
// fires their schedules, receives their webhooks, resumes every unfinished
// run at start, and serves the HTTP API (docs/api.md), /healthz and
// /metrics. It owns the state file while it runs; the CLI's `runs` verbs
// then go through the API.
package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/internal/agent"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// Options configure a Server. Store, Engine.Store and Playbooks are
// required.
type Options struct {
	// Engine is the engine configuration (store, secrets, redactor,
	// connections), given to the server's run host (internal/runner),
	// which sets what hosting decides; the server wraps Observer.
	Engine engine.Options
	// Playbooks is the playbook directory.
	Playbooks string
	// Listen is the address of the HTTP server (default 127.0.0.1:8088).
	Listen string
	// Token is the API bearer token (the admin role); the API is disabled
	// (webhooks, /healthz and /metrics still answer) when it is empty and
	// Auth gives no other way in.
	Token string
	// Auth adds users, OIDC and audit retention (auth.go).
	Auth AuthOptions
	// Routes are the webhook routes, by name.
	Routes   map[string]trigger.Route
	MaxBody  int64
	DedupTTL time.Duration
	// Schedules enables the scheduler.
	Schedules bool
	// Reload polls the playbook directory every ReloadInterval.
	Reload         bool
	ReloadInterval time.Duration
	// ShutdownGrace bounds a graceful shutdown.
	ShutdownGrace time.Duration
	// DrainGrace is how long the runs executing may take to end once a
	// drain began (SIGUSR1 or POST /api/v1/drain without a grace) before
	// they are suspended (default DefaultDrainGrace; drain.go).
	DrainGrace time.Duration
	// Limits bound what one client can hold of the listener (limits.go).
	Limits Limits
	// TLS makes the listener speak HTTPS with these files, reloaded on
	// Reload (SIGHUP) and when they change (tls.go).
	TLS TLSFiles
	// MetricsToken, when set, is the bearer token /metrics asks for.
	MetricsToken string
	// MaxRunning bounds the runs executing at once (default
	// runner.DefaultMaxRunning); more wait, committed, in a queue (internal/runner/queue.go).
	MaxRunning int
	// Watchdog is how often the server looks for unfinished runs that
	// nothing in this process executes (default 30 s), and Orphaned how
	// long such a run may go without an executor before it is taken up
	// again (default 1 min).
	Watchdog, Orphaned time.Duration
	// KeyPoll: runner.Options.KeyPoll.
	KeyPoll time.Duration
	// Lease is how long a replica's lease on itself and its runs lasts
	// without renewal when the store is shared by replicas (PostgreSQL;
	// default runner.DefaultLease).
	Lease time.Duration
	// TakeOverRunProcesses: the replicas take over the runs of a dead
	// `runbook run` process too (config server.take_over_run_processes).
	TakeOverRunProcesses bool
	// StateFile is the path of the state file; the server writes its
	// address next to it (StateFile + ".server") for the CLI.
	StateFile string
	Logger    *slog.Logger
	// SchedulerClock is for tests (default: the system clock).
	SchedulerClock trigger.Clock
	// Notify are the notifications' rules and channels (notify.go).
	Notify NotifyOptions
	// AgentLease is how long a runbook agent keeps its session and the
	// attempts assigned to it without a request (default
	// agent.DefaultLease).
	AgentLease time.Duration
}

// DefaultListen is the address the server binds unless configured.
const DefaultListen = "127.0.0.1:8088"

// Server is a running `runbook serve`.
type Server struct {
	o       Options
	log     *slog.Logger
	store   state.Store
	eng     *engine.Engine
	cat     *catalog
	metrics *metrics
	events  *broker
	runs    *runner.Host
	sched   *trigger.Scheduler
	intake  *trigger.Intake
	handler http.Handler
	ready   chan struct{}
	// draining is set when shutdown or a drain begins: /readyz answers
	// 503 from then.
	draining atomic.Bool
	// stopSched stops the scheduler (a drain).
	stopSched atomic.Pointer[context.CancelFunc]
	drainBy   atomic.Pointer[drainNote] // set by Drain

	notify notifications
	agents *agent.Dispatcher // runbook agents (api_agents.go)

	authn *auth.Authenticator
	addr  string
	certs *certs // nil: plain HTTP

	reloadMu sync.Mutex
}

// New loads the playbook directory and builds the server. An invalid
// playbook makes New fail with every problem (a *LoadError).
func New(o Options) (*Server, error) {
	if o.Engine.Store == nil {
		return nil, errors.New("server: Options.Engine.Store is required")
	}
	if o.Playbooks == "" {
		return nil, errors.New("server: Options.Playbooks is required")
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 2 * time.Second
	}
	if o.Watchdog <= 0 {
		o.Watchdog = 30 * time.Second
	}
	if o.Orphaned <= 0 {
		o.Orphaned = time.Minute
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.DrainGrace <= 0 {
		o.DrainGrace = DefaultDrainGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Limits = o.Limits.withDefaults()
	s := &Server{
		o: o, log: o.Logger, store: o.Engine.Store, cat: newCatalog(o.Playbooks),
		events: newBroker(), ready: make(chan struct{}),
	}
	authn, err := newAuthenticator(o, o.Engine.Store)
	if err != nil {
		return nil, err
	}
	s.authn = authn
	if o.TLS.Cert != "" || o.TLS.Key != "" {
		if s.certs, err = loadCerts(o.TLS); err != nil {
			return nil, err
		}
	}
	s.metrics = newMetrics(func() int { return s.runs.Running() }, playbookSource{
		store: o.Engine.Store, playbooks: s.cat.all, known: func(name string) bool { return s.cat.get(name) != nil }, schedules: o.Schedules,
	})
	if _, err := s.cat.load(); err != nil {
		return nil, err
	}
	s.metrics.loaded(s.cat.all())
	s.metrics.routes(slices.Collect(maps.Keys(o.Routes)))
	eo := o.Engine
	if eo.Logger == nil {
		eo.Logger = o.Logger
	}
	ao := agent.Options{Store: o.Engine.Store, Lease: o.AgentLease, Logger: o.Logger,
		Dispatched: func(d time.Duration) { s.metrics.dispatch.Observe(d.Seconds()) }}
	if c, ok := o.Engine.Store.(state.Coordinator); ok {
		ao.Notices = c // any replica answers any agent (internal/agent)
	}
	s.agents = agent.NewDispatcher(ao)
	eo.Host.Agents = s.agents // the run host places runs_on attempts on them
	observer := eo.Observer.Event
	eo.Observer.Event = func(runID string, ev state.Event) {
		lb := s.metrics.observe(runID, ev)
		s.events.publish(runID, ev)
		s.logRunEnd(runID, ev, lb)
		s.auditTimeout(runID, ev)
		s.observeNotify(runID, ev)
		if observer != nil {
			observer(runID, ev)
		}
	}
	s.runs = runner.New(runner.Options{
		Engine: eo, MaxRunning: o.MaxRunning, Lease: o.Lease, TakeOverRunProcesses: o.TakeOverRunProcesses,
		Watchdog: o.Watchdog, Orphaned: o.Orphaned, KeyPoll: o.KeyPoll, Logger: o.Logger, Metrics: s.metrics,
	})
	s.eng = s.runs.Engine()
	s.newNotifications(o, eo.Redactor)
	for _, pb := range s.cat.all() {
		s.runs.Remember(pb)
	}
	s.metrics.queued = s.runs.Queued
	s.metrics.parked = s.runs.Parked

	s.sched = trigger.NewScheduler(trigger.SchedulerOptions{
		Store: s.store, Starter: s.runs, Clock: o.SchedulerClock, Logger: o.Logger,
		Leader: s.runs.Leader(), Holder: s.eng.Process(), LeaderTTL: o.Lease,
		OnFire: func(f trigger.Firing) {
			s.metrics.firing(f)
			if f.Outcome == trigger.Dropped {
				s.slotDropped(f.Playbook, f.Trigger, f.Slot)
			}
		},
	})
	if c, ok := s.store.(state.Coordinator); ok {
		s.metrics.unfinished.set(s.sched.Leading, c.CountUnfinished)
	}
	intake, err := trigger.NewIntake(trigger.IntakeOptions{
		Routes: o.Routes, Store: s.store, Starter: s.runs, Playbooks: s.cat.all,
		Logger: o.Logger, MaxBody: o.MaxBody, DedupTTL: o.DedupTTL,
	})
	if err != nil {
		return nil, err
	}
	s.intake = intake
	s.handler = s.withUI(s.routes())
	return s, nil
}

// LoadError is every problem of the playbook directory.
type LoadError = loadError

// Handler is the server's HTTP handler (API, webhooks, health, metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// Engine is the server's engine.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Addr is the address the server listens on, once Ready is closed.
func (s *Server) Addr() string { <-s.ready; return s.addr }

// URL is the server's base URL (https:// with TLS), once Ready is closed.
func (s *Server) URL() string { <-s.ready; return s.url() }

func (s *Server) url() string {
	if s.certs != nil {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// Ready is closed when the server listens and has resumed its runs.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Reload reloads the playbook directory. Problems keep the current set
// and are returned (and shown by the API).
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.reloadTLS()
	changed, err := s.cat.load()
	s.metrics.reload(err == nil)
	if err != nil {
		s.logReloadRefused(err)
		return err
	}
	if changed {
		for _, pb := range s.cat.all() {
			s.runs.Remember(pb)
		}
		s.metrics.loaded(s.cat.all())
		if s.o.Schedules {
			s.sched.Set(s.cat.all())
		}
		s.log.Info("playbooks reloaded", "dir", s.o.Playbooks, "playbooks", len(s.cat.all()))
	}
	return nil
}

// Run listens, resumes unfinished runs, and serves until ctx ends; then it
// shuts down gracefully: stop taking webhooks and API requests, stop the
// scheduler, suspend executing runs with their state persisted (they
// resume at the next start), and return.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.o.Listen, err)
	}
	s.addr = ln.Addr().String()
	ln = boundConns(ln, s.o.Limits.MaxConnsPerAddress)

	// The run host takes up the unfinished runs before the server
	// serves: all of them when it holds the store alone, a replica's
	// share of the queue otherwise (internal/runner).
	resumed, err := s.runs.Recover(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	if resumed > 0 {
		s.log.Info("resumed unfinished runs", "runs", resumed)
	}
	if err := s.writeDiscovery(); err != nil {
		s.log.Warn("cannot write the server address file; the CLI will not find this server", "err", err)
	}
	defer s.removeDiscovery()

	srv := s.httpServer(s.o.Limits)
	srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	serveErr := make(chan error, 1)
	if s.certs != nil {
		srv.TLSConfig = s.certs.tlsConfig()
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(ln) }()
	}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if s.o.Schedules {
		s.sched.Set(s.cat.all())
		sctx, stop := context.WithCancel(bg)
		s.stopSched.Store(&stop)
		wg.Go(func() { _ = s.sched.Run(sctx) })
	}
	if s.o.Reload {
		wg.Go(func() { s.watch(bg) })
	}
	wg.Go(func() { s.runs.Run(bg) })
	wg.Go(func() { s.agents.Run(bg) })
	wg.Go(func() { s.watchCerts(bg) })
	wg.Go(func() { s.pruneAudit(bg) })
	s.runNotifications(bg, wg.Go)
	s.log.Info("runbook serve is ready", "addr", s.addr, "playbooks", len(s.cat.all()), "api", s.o.Token != "")
	close(s.ready)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stopBG()
		wg.Wait()
		s.runs.Suspend(s.o.ShutdownGrace)
		return fmt.Errorf("http server: %w", err)
	}

	s.log.Info("shutting down")
	s.draining.Store(true)
	grace, cancel := context.WithTimeout(context.Background(), s.o.ShutdownGrace)
	defer cancel()
	// Webhooks first: every request being handled is answered (its
	// delivery committed); new ones get 503.
	if err := s.intake.Shutdown(grace); err != nil {
		s.log.Warn("webhook intake did not drain", "err", err)
	}
	stopBG()
	wg.Wait()
	s.events.close()
	if err := srv.Shutdown(grace); err != nil {
		s.log.Warn("http server did not drain", "err", err)
		_ = srv.Close()
	}
	s.runs.Suspend(s.o.ShutdownGrace)
	s.log.Info("stopped")
	return nil
}

// watch reloads the playbook directory when it changes.
func (s *Server) watch(ctx context.Context) {
	t := time.NewTicker(s.o.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.cat.stale() {
				_ = s.Reload()
			}
		}
	}
}

// Discovery is the content of the address file the server writes next to
// the state file: how the CLI finds the process that holds the file.
type Discovery struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// DiscoveryFile is where a server using stateFile writes its address.
func DiscoveryFile(stateFile string) string { return stateFile + ".server" }

func (s *Server) writeDiscovery() error {
	if s.o.StateFile == "" {
		return nil
	}
	b, _ := json.Marshal(Discovery{URL: s.url(), PID: os.Getpid()})
	tmp := DiscoveryFile(s.o.StateFile) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, DiscoveryFile(s.o.StateFile))
}

func (s *Server) removeDiscovery() {
	if s.o.StateFile != "" {
		_ = os.Remove(DiscoveryFile(s.o.StateFile))
	}
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// findPlaybook returns the loaded playbook named name.
func (s *Server) findPlaybook(name string) *playbook.Playbook { return s.cat.get(name) }
