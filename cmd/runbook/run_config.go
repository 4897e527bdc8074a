package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/egress"
	"github.com/runbook/runbook/internal/secrets"
)

// A run outside runbook serve reads the config file serve reads (--config,
// else ./runbook.yaml when it exists): the connections' settings, under a
// playbook's own; the destination policy of the requests playbooks aim
// (http:); and its secrets file, under --secrets. Connections live in one
// place whichever process runs the playbook. The config's state file is
// not taken: the state stays --state, $RUNBOOK_STATE, else the default.

// runConfigFlag adds --config to a verb that executes runs.
func runConfigFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "config", "", "the config `file` whose connections, http policy and secrets_file the run takes (default ./runbook.yaml when it exists)")
}

// loadRunConfig loads the config for a run of file (nil when none is
// found) and applies its destination policy and secrets file. A config
// with problems prints every one (exit 2). A playbook named runbook.yaml
// run from its directory is not taken for the config.
func (a *app) loadRunConfig(path, file string, sf *stateFlags) (*config.Config, error) {
	if path == "" {
		fi, err := os.Stat(config.DefaultFile)
		if err != nil {
			return nil, nil
		}
		if pf, err := os.Stat(file); err == nil && os.SameFile(fi, pf) {
			return nil, nil
		}
		path = config.DefaultFile
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(a.stderr, strings.TrimRight(err.Error(), "\n"))
		return nil, &exitError{code: 2, err: err, quiet: true, hint: "runbook config check " + path + " shows every problem of the config"}
	}
	egress.Set(cfg.HTTP)
	if sf.secrets == "" {
		sf.secrets = cfg.SecretsFile
	}
	return cfg, nil
}

// configConnections resolves the config's connections with their secrets,
// each value added to the redactor. A secret that is not set is an error
// naming every one (exit 2), except in a rehearsal, where the simulators'
// settings stand in for the config's.
func (a *app) configConnections(cfg *config.Config, src *secrets.Source, rehearsal bool) (map[string]map[string]any, error) {
	if cfg == nil {
		return nil, nil
	}
	conns, err := cfg.ResolveConnections(func(name string) (string, bool) {
		v, ok := src.Lookup(name)
		if ok {
			a.redactor.Add(v)
		}
		return v, ok
	})
	switch {
	case err != nil && rehearsal:
		return nil, nil
	case err != nil:
		return nil, &exitError{code: 2, err: fmt.Errorf("%s: %w", cfg.File, err), hint: "set them in the environment (RUNBOOK_SECRET_NAME or NAME) or in the secrets file"}
	}
	return conns, nil
}

// configLease is the lease of `runbook run` as a replica on a database:
// server.lease of cfg, the same as the servers' (0: the default).
func configLease(cfg *config.Config) time.Duration {
	if cfg == nil {
		return 0
	}
	return cfg.Server.Lease
}
