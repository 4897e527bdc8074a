package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// runsBackend is where the runs verbs read runs: the state file itself,
// or the API of the `runbook serve` that holds it. Both give the same
// records, so the verbs print the same output either way.
type runsBackend interface {
	list(ctx context.Context, f state.RunFilter) ([]*state.Run, error)
	// get fails with an exitError naming the run when it does not exist.
	get(ctx context.Context, id string) (*state.Run, error)
	steps(ctx context.Context, id string) ([]*state.StepRecord, error)
	// children lists the sub-playbook runs of run id.
	children(ctx context.Context, id string) ([]*state.Run, error)
	// withPrefix returns up to limit runs whose ID starts with prefix,
	// newest first (see resolveRunID).
	withPrefix(ctx context.Context, prefix string, limit int) ([]*state.Run, error)
	// events returns the events after sequence number after, all of them.
	events(ctx context.Context, id string, after uint64) ([]state.Event, error)
	close()
}

var (
	_ runsBackend = (*storeBackend)(nil)
	_ runsBackend = (*apiBackend)(nil)
)

// storeBackend reads the state file directly: no server holds it.
type storeBackend struct{ store state.Store }

// list and get show a run whose process is gone as interrupted, as the
// API does (engine.Shown): this process executes none.
func (b *storeBackend) list(ctx context.Context, f state.RunFilter) ([]*state.Run, error) {
	runs, _, err := engine.ListShown(ctx, b.store, engine.Listing{RunFilter: f})
	return runs, err
}

func (b *storeBackend) get(ctx context.Context, id string) (*state.Run, error) {
	r, err := getRun(ctx, b.store, id)
	if err != nil {
		return nil, err
	}
	return engine.Shown(b.store, r, nil), nil
}

func (b *storeBackend) steps(ctx context.Context, id string) ([]*state.StepRecord, error) {
	return b.store.Steps(ctx, id)
}

func (b *storeBackend) children(ctx context.Context, id string) ([]*state.Run, error) {
	return b.list(ctx, state.RunFilter{ParentID: id})
}

func (b *storeBackend) events(ctx context.Context, id string, after uint64) ([]state.Event, error) {
	return b.store.Events(ctx, id, after, 0)
}

func (b *storeBackend) close() { b.store.Close() }

// getRun reads a run, with a clear error when it does not exist.
func getRun(ctx context.Context, store state.Store, id string) (*state.Run, error) {
	r, err := store.GetRun(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, &exitError{code: 1, err: fmt.Errorf("no run %q", id), hint: "runbook runs list"}
	}
	if err != nil {
		return nil, withHint(err, "")
	}
	return r, nil
}

// serverFlags is --server, shared by the runs verbs.
type serverFlags struct{ url string }

func (f *serverFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "server", "", "use the API of the runbook serve at `URL` (default $RUNBOOK_SERVER; else the server holding the state file, when one runs)")
}

// runsOpener opens the backend of a runs verb: the API when --server or
// $RUNBOOK_SERVER names a server or when a running server holds the state
// file, the state file otherwise.
type runsOpener struct {
	a   *app
	sf  *stateFlags
	srv *serverFlags
	src *secrets.Source // loaded once
}

// newRunsOpener adds --state, --secrets and --server to fs and returns
// what opens the runs verb's backend once the flags are parsed.
func newRunsOpener(a *app, fs *flag.FlagSet) *runsOpener {
	o := &runsOpener{a: a, sf: &stateFlags{}, srv: &serverFlags{}}
	o.sf.addState(fs)
	o.sf.addSecrets(fs)
	o.srv.add(fs)
	return o
}

func (o *runsOpener) secrets() (*secrets.Source, error) {
	if o.src != nil {
		return o.src, nil
	}
	src, err := o.a.loadSecrets(o.sf)
	if err != nil {
		return nil, err
	}
	o.src = src
	return src, nil
}

// open returns the backend, or nil (and no error) when the state file does
// not exist yet and no server was named: there are no runs.
func (o *runsOpener) open(ctx context.Context) (runsBackend, error) {
	u := o.srv.url
	if u == "" {
		u = os.Getenv("RUNBOOK_SERVER")
	}
	if u != "" {
		return o.api(strings.TrimRight(u, "/"))
	}
	path, err := o.sf.statePath()
	if err != nil {
		return nil, err
	}
	if isDSN(path) {
		// A database is shared: the verbs read and write it directly
		// while servers run.
		st, err := openLocation(path, lockTimeout)
		if err != nil {
			return nil, storeError(err)
		}
		return &storeBackend{store: st}, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	timeout := lockTimeout
	disc, hasDisc := readDiscovery(path)
	holder, hasHolder := server.ReadHolder(path)
	hasHolder = hasHolder && alive(holder.PID)
	if hasDisc || hasHolder {
		// A server or a runbook run probably holds the file: do not wait
		// for it.
		timeout = 50 * time.Millisecond
	}
	st, err := bolt.Open(path, bolt.Options{Timeout: timeout})
	if err == nil {
		return &storeBackend{store: st}, nil
	}
	if !errors.Is(err, state.ErrLocked) {
		return nil, storeError(err)
	}
	if hasDisc && healthy(ctx, disc.URL) {
		return o.api(disc.URL)
	}
	if hasHolder {
		// The runbook run holding the file serves the same routes on its
		// socket.
		if b, ok := localBackend(ctx, path, holder); ok {
			return b, nil
		}
	}
	hint := "wait for the other runbook process to finish, or use --state PATH for a separate state file"
	switch {
	case hasDisc:
		hint = fmt.Sprintf("the runbook serve recorded in %s (pid %d) does not answer at %s; check it, or pass --server URL", server.DiscoveryFile(path), disc.PID, disc.URL)
	case hasHolder && holder.Socket == "":
		hint = fmt.Sprintf("runbook run (pid %d) holds the file without a socket (see its error output); wait for it to end, or use --state PATH", holder.PID)
	case hasHolder:
		hint = fmt.Sprintf("runbook run (pid %d) holds the file and its socket %s does not answer; wait for it to end, or use --state PATH", holder.PID, holder.Socket)
	}
	return nil, &exitError{code: 1, err: err, hint: hint}
}

// openForRun opens the backend that must hold runID and returns it with
// the run's whole ID: runID may be a unique prefix of it (resolveRunID).
func (o *runsOpener) openForRun(ctx context.Context, runID string) (runsBackend, string, error) {
	b, err := o.open(ctx)
	if err != nil {
		return nil, "", err
	}
	if b == nil {
		return nil, "", &exitError{code: 1, err: fmt.Errorf("no run %q: the state file does not exist yet", runID), hint: "runbook runs list --state PATH"}
	}
	id, err := resolveRunID(ctx, b, runID)
	if err != nil {
		b.close()
		return nil, "", err
	}
	return b, id, nil
}

func (o *runsOpener) api(base string) (*apiBackend, error) {
	if _, err := url.Parse(base); err != nil || !strings.HasPrefix(base, "http") {
		return nil, &exitError{code: 2, err: fmt.Errorf("--server %q: want an http:// or https:// URL", base), hint: "runbook runs list --server http://127.0.0.1:8088"}
	}
	src, err := o.secrets()
	if err != nil {
		return nil, err
	}
	token, ok := o.a.apiToken(src)
	if !ok {
		return nil, &exitError{code: 1, err: fmt.Errorf("runbook serve at %s holds the runs, and its API needs a token: the secret %s is not set", base, apiTokenSecret),
			hint: "export " + apiTokenSecret + "=TOKEN (or RUNBOOK_SECRET_" + apiTokenSecret + ", or put it in the secrets file)"}
	}
	o.a.redactor.Add(token)
	return &apiBackend{base: base, token: token, hc: &http.Client{}}, nil
}

// readDiscovery reads the address file a server writes beside the state
// file.
func readDiscovery(statePath string) (server.Discovery, bool) {
	var d server.Discovery
	b, err := os.ReadFile(server.DiscoveryFile(statePath))
	if err != nil || json.Unmarshal(b, &d) != nil || d.URL == "" {
		return d, false
	}
	return d, true
}

// healthy reports whether a server answers GET /healthz at base.
func healthy(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
