package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
)

var configVerb = &verb{
	name:    "config",
	summary: "check the config file of runbook serve",
	run:     cmdConfig,
}

func configSubVerbs() []subVerb {
	return []subVerb{
		{"check", "validate a config file and every playbook it serves", cmdConfigCheck},
	}
}

func cmdConfig(ctx context.Context, a *app, args []string) error {
	return dispatchSub(ctx, a, "config",
		"The config file (runbook serve --config FILE, default ./"+config.DefaultFile+") holds the playbook directory, server settings, webhook routes and connection defaults. Reference: docs/config.md.",
		configSubVerbs(), args)
}

func cmdConfigCheck(_ context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name:    "config check",
		usage:   "[FILE]",
		summary: "Validate a config file (default ./" + config.DefaultFile + ") and every playbook in its playbook directory.",
		details: `Every problem is printed to stderr as file:line:col: path: message; exit 2
when the config or any playbook is invalid. Secrets the config or the
playbooks name but the environment and secrets file do not set are warnings.
On success one line sums up: the playbook directory, the number of playbooks
and webhook routes, and the listen address.`,
	})
	pos, err := parsePositional(fs, args, 0, 1, "")
	if err != nil {
		return err
	}
	file := config.DefaultFile
	if len(pos) == 1 {
		file = pos[0]
	}
	cfg, err := config.Load(file)
	if err != nil {
		return configError(a, file, err)
	}

	pbs, bad, err := checkPlaybookDir(a, cfg)
	if err != nil {
		return err
	}
	checkRoutes(a, cfg, pbs)
	if err := checkSecrets(a, cfg, pbs); err != nil {
		return err
	}
	if bad > 0 {
		what := "1 playbook is invalid"
		if bad > 1 {
			what = fmt.Sprintf("%d playbooks are invalid", bad)
		}
		fmt.Fprintln(a.stderr, what)
		return &exitError{code: 2, err: errors.New(what), quiet: true, hint: "runbook validate FILE checks one playbook"}
	}
	fmt.Fprintf(a.stdout, "ok  %s: playbooks %s (%s), %s, listen %s\n",
		file, displayPath(cfg.Playbooks), plural(len(pbs), "playbook"), plural(len(cfg.Webhooks.Routes), "route"), cfg.Server.Listen)
	return nil
}

// configError turns a Load error into the command's exit error.
func configError(a *app, file string, err error) error {
	var ds playbook.Diagnostics
	switch {
	case errors.As(err, &ds):
		fmt.Fprintln(a.stderr, strings.TrimRight(ds.Error(), "\n"))
		fmt.Fprintf(a.stderr, "config %s is invalid\n", file)
		return &exitError{code: 2, err: err, quiet: true, hint: "see docs/config.md for every field and its default"}
	case errors.Is(err, fs.ErrNotExist):
		return &exitError{code: 2, err: err, hint: "runbook config check FILE, or start from examples/config/runbook.yaml"}
	}
	return &exitError{code: 2, err: err, hint: "runbook config check FILE"}
}

// checkPlaybookDir loads every *.yaml and *.yml file directly in the
// playbook directory, printing the diagnostics of invalid ones (an ssh
// step naming a host that hosts: lacks is one). It returns
// the valid playbooks and the number of invalid ones.
func checkPlaybookDir(a *app, cfg *config.Config) ([]*playbook.Playbook, int, error) {
	entries, err := os.ReadDir(cfg.Playbooks)
	if err != nil {
		hint := "create it, or set playbooks: in " + cfg.File
		return nil, 0, &exitError{code: 2, err: fmt.Errorf("playbook directory: %w", err), hint: hint}
	}
	var (
		pbs    []*playbook.Playbook
		bad    int
		byName = map[string]string{}
	)
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		path := displayPath(filepath.Join(cfg.Playbooks, e.Name()))
		pb, err := loadPlaybook(path)
		if err == nil {
			if ds := hostDiagnostics(pb, cfg); len(ds) > 0 {
				err = ds
			}
		}
		if err != nil {
			bad++
			fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
			continue
		}
		if first, dup := byName[pb.Name]; dup {
			fmt.Fprintf(a.stderr, "warning: %s: playbook name %q is also used by %s\n", pb.Pos, pb.Name, first)
		} else {
			byName[pb.Name] = path
		}
		pbs = append(pbs, pb)
	}
	return pbs, bad, nil
}

// checkRoutes warns about webhook triggers whose route the config does not
// serve: their deliveries would be answered 404.
func checkRoutes(a *app, cfg *config.Config, pbs []*playbook.Playbook) {
	for _, pb := range pbs {
		for _, t := range pb.Triggers {
			if t.Webhook == nil {
				continue
			}
			route, ok := cfg.Webhooks.Routes[t.Webhook.Route]
			if !ok {
				fmt.Fprintf(a.stderr, "warning: %s: webhook route %q is not in webhooks.routes of %s; its deliveries would get 404\n", t.Pos, t.Webhook.Route, cfg.File)
				continue
			}
			if t.Webhook.Each == "hook" && route.Verify == config.VerifyStandard {
				fmt.Fprintf(a.stderr, "warning: %s: each: hook on route %q, which %s verifies as standard-webhooks: such a delivery has no hooks, so this trigger would start no run (drop each: hook to start one run per delivery)\n", t.Pos, t.Webhook.Route, cfg.File)
			}
		}
	}
}

// checkSecrets warns about secrets the config or a playbook names that
// neither the environment nor the secrets file sets. An unreadable
// secrets file is an error: serve would not start.
func checkSecrets(a *app, cfg *config.Config, pbs []*playbook.Playbook) error {
	file, from := cfg.SecretsFile, "secrets_file in "+cfg.File
	if file == "" {
		file, from = os.Getenv("RUNBOOK_SECRETS_FILE"), "$RUNBOOK_SECRETS_FILE"
	}
	src, err := secrets.NewSource(os.Environ(), file)
	if err != nil {
		return &exitError{code: 2, err: err, hint: "check the secrets file given by " + from}
	}
	for _, w := range src.Warnings() {
		fmt.Fprintln(a.stderr, "warning: "+w)
	}
	// A notification channel's secret is named at its place in the file.
	for _, d := range cfg.MissingSecrets(src.Lookup) {
		fmt.Fprintln(a.stderr, "warning: "+d.String()+" (runbook serve refuses to start without it)")
	}
	notifyOnly := map[string]bool{}
	for _, u := range cfg.NotificationSecrets() {
		notifyOnly[u.Name] = true
	}
	users := map[string][]string{}
	for _, name := range cfg.SecretRefs() {
		if !notifyOnly[name] {
			users[name] = append(users[name], cfg.File)
		}
	}
	for _, pb := range pbs {
		for _, name := range pb.Secrets {
			users[name] = append(users[name], "playbook "+pb.Name)
		}
	}
	names := make([]string, 0, len(users))
	for name := range users {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := src.Lookup(name); !ok {
			fmt.Fprintf(a.stderr, "warning: secret %s (used by %s) is not set: set $%s%s or $%s, or add it to the secrets file\n",
				name, strings.Join(users[name], ", "), secrets.EnvPrefix, name, name)
		}
	}
	return nil
}

// displayPath shows p relative to the working directory when it lies
// below it, else as it is.
func displayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return p
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
