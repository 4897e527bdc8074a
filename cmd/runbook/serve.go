package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/notify"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

var serveVerb = &verb{
	name:    "serve",
	summary: "run the scheduler, webhook intake and HTTP API over a playbook directory",
	run:     cmdServe,
}

// serveFlags are the command line of runbook serve.
type serveFlags struct {
	config    string // --config
	listen    string // --listen, over server.listen
	playbooks string // --playbooks, over playbooks:
	verbose   bool
	// agentLease: server.Options.AgentLease.
	agentLease time.Duration
	state      stateFlags
	sims       simFlags
}

func cmdServe(ctx context.Context, a *app, args []string) error {
	f, err := parseServeFlags(a, args)
	if err != nil {
		return err
	}
	setServeGC()
	cfg, err := a.serveConfig(f)
	if err != nil {
		return err
	}
	src, err := a.loadSecrets(&f.state)
	if err != nil {
		return err
	}
	sec, err := a.serveSecrets(cfg, src, f.sims.embedded || f.sims.url != "")
	if err != nil {
		return err
	}
	if f.state.state == cfg.State && cfg.StatePasswordSecret != "" {
		if f.state.state, err = cfg.StateDSN(src.Lookup); err != nil {
			return &exitError{code: 2, err: err, hint: "set the secret (environment or secrets file) that holds the database password"}
		}
	}
	statePath, store, err := openServeState(&f.state)
	if err != nil {
		return err
	}
	defer store.Close()
	conns, stopSim, err := f.sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	conns.defaults = sec.connections

	logger := a.serveLogger(f.verbose)
	defer startRetention(ctx, store, cfg.Retention, logger)()
	eo := a.engineOptions(store, src)
	eo.Connection = conns.resolve
	eo.Sim = f.sims.recorded()
	eo.Logger = logger
	authOptions, err := serverAuth(cfg)
	if err != nil {
		return err
	}
	srv, err := a.newServer(server.Options{
		Engine: eo, Playbooks: cfg.Playbooks, Listen: cfg.Server.Listen, Token: sec.token,
		Routes: sec.routes, MaxBody: cfg.Server.MaxBody, DedupTTL: cfg.Webhooks.DedupTTL,
		Schedules: cfg.Schedules, Reload: cfg.Server.Reload, ReloadInterval: cfg.Server.ReloadInterval,
		ShutdownGrace: cfg.Server.ShutdownGrace, DrainGrace: cfg.Server.DrainGrace, Limits: server.Limits{ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
			ReadTimeout: cfg.Server.ReadTimeout, WriteTimeout: cfg.Server.WriteTimeout, IdleTimeout: cfg.Server.IdleTimeout,
			MaxConnsPerAddress: cfg.Server.MaxConnsPerAddress}, MaxRunning: cfg.Server.MaxRunning, Lease: cfg.Server.Lease, TakeOverRunProcesses: cfg.Server.TakeOverRunProcesses, StateFile: stateFile(statePath), Logger: logger,
		Auth: authOptions, TLS: server.TLSFiles{Cert: cfg.Server.TLSCert, Key: cfg.Server.TLSKey}, MetricsToken: sec.metrics,
		Notify: sec.notify.NotifyOptions, AgentLease: f.agentLease,
	})
	if err != nil {
		return err
	}
	pretouchHeap(cfg.Server.Pretouch) // last before it listens: see pretouchHeap
	return a.serve(ctx, srv, func(addr string) {
		base := srv.URL()
		api := "API at " + base + "/api/v1"
		if sec.token == "" {
			api = "API disabled (secret " + cfg.Server.TokenSecret + " is not set)"
		}
		fmt.Fprintf(a.stdout, "runbook serve: listening on %s; web UI at %s/; %s; playbooks from %s; state %s\n", base, base, api, cfg.Playbooks, displayLocation(statePath))
	})
}

func parseServeFlags(a *app, args []string) (*serveFlags, error) {
	fs := newFlagSet(a, command{
		name:  "serve",
		usage: "[--config runbook.yaml] [--sim] [flags]",
		summary: "Load every playbook of the configured directory, fire their schedules, receive their webhooks, " +
			"resume every unfinished run, and serve the HTTP API until SIGTERM or Ctrl-C.",
		details: `The config file is --config, else runbook.yaml in the working directory, else
the defaults (playbooks/ beside it, 127.0.0.1:8088). See docs/config.md and
docs/api.md. An invalid playbook stops the start with every problem printed.
SIGHUP reloads the playbook directory (so does any change to it, polled);
a reload with a problem keeps the playbooks in use. SIGTERM shuts down
gracefully: webhooks answer 503, in-flight deliveries are committed, runs
are suspended with their state saved and resume at the next start.`,
	})
	f := &serveFlags{}
	fs.StringVar(&f.config, "config", "", "config `file` (default ./runbook.yaml when it exists)")
	fs.StringVar(&f.listen, "listen", "", "listen `address` (overrides server.listen)")
	fs.StringVar(&f.playbooks, "playbooks", "", "playbook `directory` (overrides playbooks:)")
	fs.BoolVar(&f.verbose, "v", false, "log every run start and end (info level)")
	fs.DurationVar(&f.agentLease, "agent-lease", 0, "how long a runbook agent that stopped answering keeps its attempts (default 15s; docs/agents.md)")
	f.state.addState(fs)
	f.state.addSecrets(fs)
	f.sims.add(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	return f, wantArgs(fs, pos, 0, 0, "")
}

// serveMemoryLimit is the default soft memory limit of `runbook serve`:
// 10,000 waiting runs stay under 300 MB of RSS with it (BenchmarkWaitingRuns
// with GOMEMLIMIT=160MiB); a busier server goes past it, at the price of
// more frequent collections (the runtime caps their CPU share).
const serveMemoryLimit = 160 << 20

// serveGCPercent is the default GOGC of `runbook serve`: the heap may grow
// to five times what is live before a collection, rather than twice,
// within the soft memory limit. A busy server spends its CPU on runs
// rather than collections (docs/performance.md), and the limit still
// bounds the heap.
const serveGCPercent = 400

// setServeGC sets serveMemoryLimit unless GOMEMLIMIT is set
// (GOMEMLIMIT=off: no limit), and serveGCPercent unless GOGC is set or
// there is no limit (nothing would then bound five times the live heap).
// A server holds thousands of waiting runs whose stacks grow while they
// resume; a soft limit makes the runtime collect and return that memory
// promptly instead of at its leisure.
func setServeGC() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
	}
	if os.Getenv("GOGC") == "" && debug.SetMemoryLimit(-1) < math.MaxInt64 {
		debug.SetGCPercent(serveGCPercent)
	}
}

// serveConfig loads the config file and lays the flags over it: --listen,
// --playbooks, and the config's state and secrets files under --state and
// --secrets. A config with problems prints every one (exit 2).
func (a *app) serveConfig(f *serveFlags) (*config.Config, error) {
	cfg, err := loadConfig(f.config)
	if err != nil {
		fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
		return nil, &exitError{code: 2, err: err, quiet: true, hint: "runbook config check shows every problem of the config"}
	}
	if f.listen != "" {
		cfg.Server.Listen = f.listen
	}
	// The destination policy of the requests playbooks aim holds for
	// every run this process executes.
	egress.Set(cfg.HTTP)
	if f.playbooks != "" {
		abs, err := filepath.Abs(f.playbooks)
		if err != nil {
			return nil, err
		}
		cfg.Playbooks = abs
	}
	if f.state.state == "" {
		f.state.state = cfg.State
	}
	if f.state.secrets == "" {
		f.state.secrets = cfg.SecretsFile
	}
	return cfg, nil
}

// loadConfig loads --config, else ./runbook.yaml when it exists, else the
// defaults.
func loadConfig(path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path)
	}
	if _, err := os.Stat("runbook.yaml"); err == nil {
		return config.Load("runbook.yaml")
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return config.Default(wd), nil
}

// serveSecrets are the secret values the config names, resolved before
// the server starts.
type serveSecrets struct {
	token       string // the API bearer token; "" disables the API
	metrics     string // the token /metrics asks for; "": none
	routes      map[string]trigger.Route
	connections map[string]map[string]any
	notify      notifyChannels
}

// serveSecrets resolves the API token, every secret of each webhook route
// and the credentials of the config's connections, adding each value to
// the redactor. Any missing secret is an error that lists them all (exit
// 2), except that a rehearsal (--sim, --sim-url) leaves out a route whose
// secret is missing, with a warning; a missing token disables the API.
func (a *app) serveSecrets(cfg *config.Config, src *secrets.Source, rehearsal bool) (*serveSecrets, error) {
	lookup := func(name string) (string, bool) {
		v, ok := src.Lookup(name)
		if ok {
			a.redactor.Add(v)
		}
		return v, ok
	}
	sec := &serveSecrets{}
	if cfg.Server.TokenSecret != "" {
		sec.token, _ = lookup(cfg.Server.TokenSecret)
	}
	var missing []string
	sec.routes, missing = a.webhookRoutes(cfg, lookup, rehearsal)
	if name := cfg.Server.MetricsTokenSecret; name != "" {
		var ok bool
		if sec.metrics, ok = lookup(name); !ok || sec.metrics == "" {
			missing = append(missing, "server.metrics_token: secret "+name+" is not set")
		}
	}
	conns, err := cfg.ResolveConnections(lookup)
	if err != nil {
		missing = append(missing, err.Error())
	}
	var located []string
	sec.notify, located = notifyOptions(cfg, lookup)
	if conns != nil {
		maps.Copy(conns, sec.notify.Connections)
	}
	sec.connections = conns
	if len(missing) > 0 || len(located) > 0 {
		sort.Strings(missing)
		for _, m := range missing {
			fmt.Fprintln(a.stderr, cfg.File+": "+m)
		}
		for _, m := range located {
			fmt.Fprintln(a.stderr, m)
		}
		return nil, &exitError{code: 2, err: errors.New("secrets are missing"), quiet: true, hint: "set them in the environment (RUNBOOK_SECRET_NAME or NAME) or in the secrets file"}
	}
	return sec, nil
}

// notifyChannels are the notification channels of the config: for the
// server's sender, and as connections (notify:NAME) for the notify step.
type notifyChannels struct {
	server.NotifyOptions
	Connections map[string]map[string]any
}

// notifyOptions builds the notification channels of the config with
// their secrets. It returns a problem, at its place in the file, for each
// secret not set and each channel that cannot be built (a signing secret
// that is not whsec_, a CA file that does not load).
func notifyOptions(cfg *config.Config, lookup func(string) (string, bool)) (notifyChannels, []string) {
	nt := cfg.Notifications
	o := notifyChannels{NotifyOptions: server.NotifyOptions{Rules: nt.Rules, Channels: map[string]notify.Channel{}, Backoff: nt.Backoff,
		MaxBackoff: nt.MaxBackoff, SendTimeout: nt.SendTimeout, PublicURL: cfg.Server.PublicURL}, Connections: map[string]map[string]any{}}
	var problems []string
	for _, d := range cfg.MissingSecrets(lookup) {
		problems = append(problems, d.String())
	}
	if len(problems) > 0 {
		return o, problems
	}
	for name, ch := range nt.Channels {
		c, err := notify.NewChannel(ch, lookup)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: notifications.channels.%s: %v", ch.Pos, name, err))
			continue
		}
		o.Channels[name] = c
		if st, err := notify.Settings(ch, lookup); err == nil {
			o.Connections[notify.ConnectionPrefix+name] = st.Map()
		}
	}
	sort.Strings(problems)
	return o, problems
}

// webhookRoutes resolves the secrets of each webhook route of the config.
// It returns the routes whose every secret is set, and a problem for each
// route with one missing (in a rehearsal, a warning instead).
func (a *app) webhookRoutes(cfg *config.Config, lookup func(string) (string, bool), rehearsal bool) (map[string]trigger.Route, []string) {
	routes := map[string]trigger.Route{}
	var missing []string
	for name, r := range cfg.Webhooks.Routes {
		values, absent := secretValues(lookup, append([]string{r.Secret}, r.Secrets...))
		switch {
		case absent == "":
			routes[name] = trigger.Route{Verify: r.Verify, Secret: values[0], Secrets: values[1:]}
		case rehearsal:
			// A rehearsal may leave a route out; a real server may not.
			fmt.Fprintf(a.stderr, "warning: webhook route %s is disabled: secret %s is not set\n", name, absent)
		default:
			missing = append(missing, fmt.Sprintf("webhooks.routes.%s.secret: secret %s is not set", name, absent))
		}
	}
	return routes, missing
}

// secretValues looks up names in order, up to the first that is unset or
// empty: it returns the values found and that name ("" when every one is
// set).
func secretValues(lookup func(string) (string, bool), names []string) (values []string, absent string) {
	for _, name := range names {
		v, ok := lookup(name)
		if !ok || v == "" {
			return values, name
		}
		values = append(values, v)
	}
	return values, ""
}

// openServeState opens the state the server holds: a file (its directory
// created) or a database shared with other replicas.
func openServeState(sf *stateFlags) (string, state.Store, error) {
	path, err := sf.statePath()
	if err != nil {
		return "", nil, err
	}
	if !isDSN(path) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", nil, err
		}
	}
	store, err := sf.openStore()
	if err != nil {
		return "", nil, err
	}
	return path, store, nil
}

// serveLogger is the server's log on stderr, secrets masked: warnings, and
// with -v every run start and end.
func (a *app) serveLogger(verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(a.redactor.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})))
}

// newServer builds the server; an invalid playbook directory prints every
// problem (exit 2).
func (a *app) newServer(o server.Options) (*server.Server, error) {
	srv, err := server.New(o)
	var le *server.LoadError
	if errors.As(err, &le) {
		for _, p := range le.Problems {
			fmt.Fprintln(a.stderr, p)
		}
		return nil, &exitError{code: 2, err: err, quiet: true, hint: "runbook validate FILE shows the problems of one playbook; the server starts only when every playbook is valid"}
	}
	return srv, err
}

// serve runs srv until ctx ends, reloading its playbooks on SIGHUP, and
// calls listening with its address once it listens.
func (a *app) serve(ctx context.Context, srv *server.Server, listening func(addr string)) error {
	hup, usr1 := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(hup)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := srv.Reload(); err == nil {
					fmt.Fprintln(a.stderr, "reloaded the playbook directory")
				}
			case <-usr1:
				fmt.Fprintln(a.stderr, "draining: taking no new run; GET /api/v1/drain says when nothing executes here any more")
				go srv.Drain(0, "signal SIGUSR1", "")
			}
		}
	}()
	go func() {
		select {
		case <-srv.Ready():
			listening(srv.Addr())
		case <-ctx.Done():
		}
	}()
	if err := srv.Run(ctx); err != nil {
		return &exitError{code: 1, err: err, hint: "runbook serve --listen 127.0.0.1:0 picks a free port"}
	}
	return nil
}
