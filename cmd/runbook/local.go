package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A `runbook run` on a bbolt file holds the file alone while it runs. It
// serves the API's runs routes on a unix socket beside the file
// (server.Local) and describes itself in the holder file
// (server.HolderFile), so that `runs list|show|logs|approve|cancel` in
// another terminal go through it, and a second `runbook run` can say who
// holds the file.

// runState is what `runbook run` opened: the store, or the server that
// holds the state file and executes the run instead.
type runState struct {
	store  state.Store
	file   string      // the bbolt file, "" for a database
	remote *apiBackend // a runbook serve holds the file
	disc   server.Discovery
}

// openRunState opens the state for `runbook run`: the store, or, when a
// runbook serve holds the file, that server's API. Another `runbook run`
// holding the file is a conflict naming its PID (exit 2).
func (a *app) openRunState(ctx context.Context, sf *stateFlags) (*runState, error) {
	path, err := sf.statePath()
	if err != nil {
		return nil, err
	}
	if isDSN(path) {
		st, err := openLocation(path, lockTimeout)
		if err != nil {
			return nil, storeError(err)
		}
		return &runState{store: st}, nil
	}
	timeout := lockTimeout
	disc, hasDisc := readDiscovery(path)
	holder, hasHolder := server.ReadHolder(path)
	if hasDisc || hasHolder && alive(holder.PID) {
		timeout = 50 * time.Millisecond // a long-running process holds it
	}
	st, err := bolt.Open(path, bolt.Options{Timeout: timeout})
	if err == nil {
		return &runState{store: st, file: path}, nil
	}
	if !errors.Is(err, state.ErrLocked) {
		return nil, storeError(err)
	}
	if hasDisc && healthy(ctx, disc.URL) {
		o := &runsOpener{a: a, sf: sf, srv: &serverFlags{}}
		b, err := o.api(disc.URL)
		if err != nil {
			return nil, err
		}
		return &runState{remote: b, disc: disc, file: path}, nil
	}
	if hasDisc && alive(disc.PID) {
		return nil, &exitError{code: 2,
			err:  fmt.Errorf("state file %s is held by runbook serve (pid %d), which does not answer at %s: %w", path, disc.PID, disc.URL, state.ErrLocked),
			hint: "check that server (its log, or kill -CONT " + fmt.Sprint(disc.PID) + " if it was stopped), or run with --state PATH for a separate state file"}
	}
	return nil, heldError(path, err)
}

// heldError explains a state file another process holds: the `runbook
// run` named by the holder file, with its PID, and what to do.
func heldError(path string, err error) error {
	h, ok := server.ReadHolder(path)
	if !ok || !alive(h.PID) {
		return storeError(err)
	}
	what := "runbook run"
	if h.Playbook != "" {
		what += " of playbook " + h.Playbook
	}
	msg := fmt.Errorf("state file %s is held by %s (pid %d), started %s: %w", path, what, h.PID, h.Started.Local().Format(time.DateTime), state.ErrLocked)
	return &exitError{code: 2, err: msg,
		hint: "wait for it to end; meanwhile runbook runs list|show|logs|approve|cancel work beside it; or run with --state PATH for a separate state file"}
}

// startLocal serves the runs routes of this process on the socket beside
// the state file. Without a socket the run goes on; the runs verbs then
// wait for the file.
func (a *app) startLocal(rs *runState, playbook string) *server.Local {
	if rs.file == "" {
		return nil
	}
	logger := slog.New(a.redactor.Handler(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return server.NewLocal(server.LocalOptions{Store: rs.store, Logger: logger, StateFile: rs.file, Playbook: playbook})
}

// localBackend is the API of the `runbook run` holding the state file,
// over its socket, when it answers.
func localBackend(ctx context.Context, stateFile string, h server.Holder) (*apiBackend, bool) {
	if h.Socket == "" {
		return nil, false
	}
	sock := h.Socket
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	b := &apiBackend{base: "http://runbook.sock", hc: hc, who: fmt.Sprintf("runbook run (pid %d) at %s", h.PID, sock), local: stateFile}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/healthz", nil)
	if err != nil {
		return nil, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false
	}
	resp.Body.Close()
	return b, resp.StatusCode == http.StatusOK
}

// holderEnded reads run id from the state file when the runbook run whose
// socket b talks to has ended (err says it no longer answers), so a verb
// that followed the run to its end reports it: the process that executed
// it exits with it.
func (b *apiBackend) holderEnded(ctx context.Context, id string, err error) (*api.Run, bool) {
	sb, ok := b.heldNoMore(err)
	if !ok {
		return nil, false
	}
	defer sb.close()
	r, gerr := sb.get(ctx, id)
	if gerr != nil {
		return nil, false
	}
	recs, serr := sb.steps(ctx, id)
	if serr != nil {
		return nil, false
	}
	out := &api.Run{Run: r, Steps: make([]api.RunStep, len(recs))}
	for i, rec := range recs {
		out.Steps[i] = api.RunStep{StepRecord: rec}
	}
	return out, true
}

// holderEndedEvents reads the events of run id after after from the state
// file when the runbook run whose socket b talks to has ended.
func (b *apiBackend) holderEndedEvents(ctx context.Context, id string, after uint64, err error) ([]state.Event, bool) {
	sb, ok := b.heldNoMore(err)
	if !ok {
		return nil, false
	}
	defer sb.close()
	evs, err := sb.events(ctx, id, after)
	return evs, err == nil
}

// heldNoMore opens the state file when err says that the runbook run whose
// socket b talks to no longer answers, and that process has let the file
// go.
func (b *apiBackend) heldNoMore(err error) (*storeBackend, bool) {
	if b.local == "" || fault.CodeOf(err) != fault.Unavailable {
		return nil, false
	}
	st, oerr := bolt.Open(b.local, bolt.Options{Timeout: lockTimeout})
	if oerr != nil {
		return nil, false
	}
	return &storeBackend{store: st}, true
}

// holderEndedStream ends a log stream of run id whose socket no longer
// answers because the runbook run holding the state file has ended: the
// events after *after are read from the file and given to each, and the
// run's status is returned (ok false when the file cannot tell).
func (b *apiBackend) holderEndedStream(ctx context.Context, id string, after *uint64, each func(state.Event) bool, err error) (state.RunStatus, bool) {
	sb, ok := b.heldNoMore(err)
	if !ok {
		return "", false
	}
	defer sb.close()
	evs, err := sb.events(ctx, id, *after)
	if err != nil {
		return "", false
	}
	r, err := sb.get(ctx, id)
	if err != nil {
		return "", false
	}
	for _, ev := range evs {
		*after = ev.Seq
		if !each(ev) {
			break
		}
	}
	return r.Status, true
}
