package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/trigger"
)

var serveVerb = &verb{
	name:    "serve",
	summary: "run the scheduler, webhook intake and HTTP API over a playbook directory",
	run:     cmdServe,
}

func cmdServe(ctx context.Context, a *app, args []string) error {
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
	cfgPath := fs.String("config", "", "config `file` (default ./runbook.yaml when it exists)")
	listen := fs.String("listen", "", "listen `address` (overrides server.listen)")
	dir := fs.String("playbooks", "", "playbook `directory` (overrides playbooks:)")
	verbose := fs.Bool("v", false, "log every run start and end (info level)")
	var sf stateFlags
	sf.addState(fs)
	sf.addSecrets(fs)
	var sims simFlags
	sims.add(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 0, ""); err != nil {
		return err
	}

	if os.Getenv("GOMEMLIMIT") == "" {
		// A server holds thousands of waiting runs whose stacks grow while
		// they resume; a soft limit makes the runtime collect and return
		// that memory promptly instead of at its leisure. GOMEMLIMIT
		// overrides it (GOMEMLIMIT=off: none).
		debug.SetMemoryLimit(serveMemoryLimit)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
		return &exitError{code: 2, err: err, quiet: true, hint: "runbook config check shows every problem of the config"}
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *dir != "" {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		cfg.Playbooks = abs
	}
	if sf.state == "" {
		sf.state = cfg.State
	}
	if sf.secrets == "" {
		sf.secrets = cfg.SecretsFile
	}

	src, err := a.loadSecrets(&sf)
	if err != nil {
		return err
	}
	token := ""
	if cfg.Server.TokenSecret != "" {
		if v, ok := src.Lookup(cfg.Server.TokenSecret); ok && v != "" {
			token = v
			a.redactor.Add(v)
		}
	}
	routes := map[string]trigger.Route{}
	var missing []string
routeLoop:
	for name, r := range cfg.Webhooks.Routes {
		var values []string
		for _, secret := range append([]string{r.Secret}, r.Secrets...) {
			v, ok := src.Lookup(secret)
			if (!ok || v == "") && (sims.embedded || sims.url != "") {
				// A rehearsal may leave a route out; a real server may not.
				fmt.Fprintf(a.stderr, "warning: webhook route %s is disabled: secret %s is not set\n", name, secret)
				continue routeLoop
			}
			if !ok || v == "" {
				missing = append(missing, fmt.Sprintf("webhooks.routes.%s.secret: secret %s is not set", name, secret))
				continue routeLoop
			}
			a.redactor.Add(v)
			values = append(values, v)
		}
		routes[name] = trigger.Route{Verify: r.Verify, Secret: values[0], Secrets: values[1:]}
	}
	defaults, err := cfg.ResolveConnections(func(name string) (string, bool) {
		v, ok := src.Lookup(name)
		if ok {
			a.redactor.Add(v)
		}
		return v, ok
	})
	if err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		for _, m := range missing {
			fmt.Fprintln(a.stderr, cfg.File+": "+m)
		}
		return &exitError{code: 2, err: errors.New("secrets are missing"), quiet: true, hint: "set them in the environment (RUNBOOK_SECRET_NAME or NAME) or in the secrets file"}
	}

	statePath, err := sf.statePath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(statePath), 0o700); err != nil {
		return err
	}
	store, err := sf.openStore()
	if err != nil {
		return err
	}
	defer store.Close()

	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	conns.defaults = defaults

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(a.redactor.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})))
	eo := a.engineOptions(store, src)
	eo.Connection = conns.resolve
	eo.Logger = logger
	srv, err := server.New(server.Options{
		Engine: eo, Playbooks: cfg.Playbooks, Listen: cfg.Server.Listen, Token: token,
		Routes: routes, MaxBody: cfg.Server.MaxBody, DedupTTL: cfg.Webhooks.DedupTTL,
		Schedules: cfg.Schedules, Reload: cfg.Server.Reload, ReloadInterval: cfg.Server.ReloadInterval,
		ShutdownGrace: cfg.Server.ShutdownGrace, StateFile: statePath, Logger: logger,
	})
	if err != nil {
		var le *server.LoadError
		if errors.As(err, &le) {
			for _, p := range le.Problems {
				fmt.Fprintln(a.stderr, p)
			}
			return &exitError{code: 2, err: err, quiet: true, hint: "runbook validate FILE shows the problems of one playbook; the server starts only when every playbook is valid"}
		}
		return err
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := srv.Reload(); err == nil {
					fmt.Fprintln(a.stderr, "reloaded the playbook directory")
				}
			}
		}
	}()
	go func() {
		select {
		case <-srv.Ready():
			api := "API at http://" + srv.Addr() + "/api/v1"
			if token == "" {
				api = "API disabled (secret " + cfg.Server.TokenSecret + " is not set)"
			}
			fmt.Fprintf(a.stdout, "runbook serve: listening on http://%s; %s; playbooks from %s; state %s\n", srv.Addr(), api, cfg.Playbooks, statePath)
		case <-ctx.Done():
		}
	}()
	if err := srv.Run(ctx); err != nil {
		return &exitError{code: 1, err: err, hint: "runbook serve --listen 127.0.0.1:0 picks a free port"}
	}
	return nil
}

// serveMemoryLimit is the default soft memory limit of `runbook serve`:
// 10,000 waiting runs stay under 300 MB of RSS with it (BenchmarkWaitingRuns
// with GOMEMLIMIT=160MiB); a busier server goes past it, at the price of
// more frequent collections (the runtime caps their CPU share).
const serveMemoryLimit = 160 << 20

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
