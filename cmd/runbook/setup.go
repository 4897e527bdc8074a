package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
)

// redactor is the engine's Redactor: one per process, used for everything
// the CLI prints.
type redactor = engine.Redactor

type nopRedactor struct{}

func (nopRedactor) Add(...string)                       {}
func (nopRedactor) AddDerived(...string)                {}
func (nopRedactor) Contains(string) bool                { return false }
func (nopRedactor) String(s string) string              { return s }
func (nopRedactor) Value(v any) any                     { return v }
func (nopRedactor) Bytes(b []byte) []byte               { return b }
func (nopRedactor) Handler(h slog.Handler) slog.Handler { return h }

// stateFlags are --state and --secrets, shared by the verbs that need them.
type stateFlags struct {
	state   string
	secrets string
}

func (sf *stateFlags) addState(fs *flag.FlagSet) {
	fs.StringVar(&sf.state, "state", "", "state `file` or postgres:// database (default $RUNBOOK_STATE, else $XDG_STATE_HOME/runbook/state.db)")
}

func (sf *stateFlags) addSecrets(fs *flag.FlagSet) {
	fs.StringVar(&sf.secrets, "secrets", "", "secrets `file` (default $RUNBOOK_SECRETS_FILE); the environment is always used too")
}

// statePath resolves the state file: --state, $RUNBOOK_STATE,
// $XDG_STATE_HOME/runbook/state.db, ~/.local/state/runbook/state.db.
func (sf *stateFlags) statePath() (string, error) {
	if sf.state != "" {
		return sf.state, nil
	}
	if p := os.Getenv("RUNBOOK_STATE"); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "runbook", "state.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", &exitError{code: 2, err: fmt.Errorf("cannot find the state file: %w", err), hint: "runbook " + "run --state PATH ..."}
	}
	return filepath.Join(home, ".local", "state", "runbook", "state.db"), nil
}

// lockTimeout is how long opening the state file waits for another
// process to release it.
const lockTimeout = time.Second

// openStore opens the state (file or database) for writing.
func (sf *stateFlags) openStore() (state.Store, error) {
	path, err := sf.statePath()
	if err != nil {
		return nil, err
	}
	st, err := openLocation(path, lockTimeout)
	if err != nil {
		return nil, storeError(err)
	}
	return st, nil
}

// openExisting opens the state when it exists (nil, nil when there is no
// state file yet: nothing has run). A database always exists.
func (sf *stateFlags) openExisting() (state.Store, error) {
	path, err := sf.statePath()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); !isDSN(path) && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	st, err := openLocation(path, lockTimeout)
	if err != nil {
		return nil, storeError(err)
	}
	return st, nil
}

// storeError adds the exit code and a hint to a store open error.
func storeError(err error) error {
	switch {
	case errors.Is(err, state.ErrLocked):
		return &exitError{code: 1, err: err, hint: "wait for the other runbook process to finish, or use --state PATH for a separate state file"}
	case errors.Is(err, state.ErrCorrupt):
		return &exitError{code: 1, err: err, hint: "move the file aside and use a fresh one (--state PATH)"}
	case fault.CodeOf(err) == fault.Invalid:
		return &exitError{code: 2, err: err, hint: "a database state is postgres://USER@HOST:PORT/DB (the password from PGPASSWORD or the URL)"}
	case fault.CodeOf(err) == fault.Unavailable:
		return &exitError{code: 1, err: err, hint: "check that the PostgreSQL server named by --state or $RUNBOOK_STATE is up and reachable"}
	}
	return &exitError{code: 1, err: err, hint: "runbook run --state PATH FILE"}
}

// loadSecrets builds the secret source (environment and secrets file) and
// installs the process redactor.
func (a *app) loadSecrets(sf *stateFlags) (*secrets.Source, error) {
	file := sf.secrets
	if file == "" {
		file = os.Getenv("RUNBOOK_SECRETS_FILE")
	}
	src, err := secrets.NewSource(os.Environ(), file)
	if err != nil {
		return nil, &exitError{code: 2, err: err, hint: "check the secrets file given by --secrets or $RUNBOOK_SECRETS_FILE"}
	}
	for _, w := range src.Warnings() {
		fmt.Fprintln(a.stderr, "warning: "+w)
	}
	a.redactor = secrets.NewRedactor()
	return src, nil
}

// engineOptions returns the engine options of the run host of a verb
// that executes runs (newHost).
func (a *app) engineOptions(store state.Store, src *secrets.Source) engine.Options {
	logger := slog.New(a.redactor.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return engine.Options{
		Store:     store,
		Logger:    logger,
		Secrets:   src,
		Redactor:  a.redactor,
		Environ:   os.Environ(),
		Playbooks: engine.Playbooks{Load: loadPlaybook},
	}
}

// newHost returns the run host of this process (runner.Options.Embedded):
// `runbook run`, and `runs approve|retry|cancel` for a run nothing else
// holds. On a store shared with other processes (a database the replicas
// of runbook serve use) it is a replica of kind run with lease (0: the
// default, as a server's), and its runs are fenced by that lease: every
// write that moves a run forward is refused once another process owns
// the run, and no step starts while the lease lapsed. Every run is
// fenced, not only those the replicas may take over (take_over,
// server.take_over_run_processes): an explicit resume elsewhere takes any
// run of a process that is gone, and one rule is simpler to reason about.
// Open it before use and Close it after.
func (a *app) newHost(eo engine.Options, lease time.Duration) *runner.Host {
	return runner.New(runner.Options{Engine: eo, Embedded: true, Lease: lease, Logger: eo.Logger})
}

// follow follows run runID of host h to its outcome (runner.Host.Await):
// until it ends, or, without answers, until it waits for an answer.
// When ctx ends first (Ctrl-C) the run is cancelled and followed to its
// end.
func follow(ctx context.Context, h *runner.Host, runID string, answers bool) (*state.Run, error) {
	r, err := h.Await(ctx, runID, answers)
	if ctx.Err() == nil || r != nil {
		return r, err
	}
	h.CancelRun(runID, context.Cause(ctx))
	return h.Await(context.WithoutCancel(ctx), runID, true)
}

func loadPlaybook(path string) (*playbook.Playbook, error) {
	return playbook.Load(path, playbook.LoadOptions{})
}
