package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// remoteRun is a `runbook run` whose state file a runbook serve holds:
// the server executes the run and this process follows it.
type remoteRun struct {
	rs      *runState
	pb      *playbook.Playbook // nil with --resume alone
	file    string
	given   map[string]any
	resume  string
	detach  bool
	wait    bool
	out     *outputFlag
	quiet   bool
	srvName string
	after   uint64 // the events before the run was (re)started here
}

// runRemote submits the run to the server that holds the state file (a
// playbook of its directory, with the same content as FILE) and follows
// it with the progress `run` prints; --detach returns once the server has
// it. Inputs, secret ones too, go in the request body.
func (a *app) runRemote(ctx context.Context, rr *remoteRun) error {
	b := rr.rs.remote
	rr.srvName = fmt.Sprintf("runbook serve (pid %d) at %s", rr.rs.disc.PID, rr.rs.disc.URL)
	if rr.pb != nil {
		for _, in := range rr.pb.Inputs {
			if v, ok := rr.given[in.Name]; ok && in.Secret {
				a.redactor.Add(fmt.Sprint(v))
			}
		}
	}
	var id string
	var err error
	if rr.resume != "" {
		id, err = a.resumeRemote(ctx, rr)
	} else {
		id, err = a.startRemote(ctx, rr)
	}
	if err != nil {
		return err
	}
	if rr.detach {
		if rr.out.json {
			return writeJSON(a.stdout, map[string]string{"id": id, "server": rr.rs.disc.URL})
		}
		// The bare ID on stdout, for RUN=$(runbook run --detach FILE).
		fmt.Fprintf(a.stderr, "run %s started on %s; follow it with: runbook runs logs -f %s\n", id, rr.srvName, id)
		fmt.Fprintln(a.stdout, id)
		return nil
	}
	p := a.newProgress(rr.out, rr.quiet, id)
	if rr.wait {
		// Follow through approvals: the server waits for their answers.
		_, err = b.follow(ctx, id, rr.after, func(ev state.Event) bool { p.observe(id, ev); return true })
		err = withHint(err, "runbook runs show "+id)
	} else {
		err = a.watchRemote(ctx, b, []string{id}, []uint64{rr.after}, p)
	}
	p.close()
	if ctx.Err() != nil {
		// Interrupted: the run is the server's and goes on.
		return &exitError{code: 1, err: fmt.Errorf("stopped following run %s, which goes on in %s", id, rr.srvName), hint: "runbook runs logs -f " + id}
	}
	if err != nil {
		return err
	}
	return a.finishRemote(ctx, b, id, rr.out)
}

// apartUnlessServers returns rs, held by a runbook serve, when the server
// has a playbook of pb's name; else the state this process runs pb in,
// apart from the server: STATE.adhoc.db beside the server's file. The
// server runs the playbooks of its directory only; an ad-hoc playbook
// beside it runs as it would without a server, in a state of its own, and
// stderr says where.
func (a *app) apartUnlessServers(ctx context.Context, rs *runState, sf *stateFlags, pb *playbook.Playbook, file string, detach bool) (*runState, error) {
	err := rs.remote.do(ctx, http.MethodGet, "/api/v1/playbooks/"+url.PathEscape(pb.Name), nil, nil)
	if fault.CodeOf(err) != fault.NotFound {
		return rs, nil // the server's, or an error startRemote reports
	}
	srv := fmt.Sprintf("runbook serve (pid %d)", rs.disc.PID)
	if detach {
		return nil, &exitError{code: 2,
			err:  fmt.Errorf("%s holds the state file %s and has no playbook named %q: it runs the playbooks of its directory only, so nothing would run %s once this process returns", srv, rs.file, pb.Name, file),
			hint: "run it without --detach (here, apart from the server), or put " + file + " in the server's playbook directory (it reloads)"}
	}
	apart := strings.TrimSuffix(rs.file, filepath.Ext(rs.file)) + ".adhoc.db"
	fmt.Fprintf(a.stderr, "%s holds the state file %s and runs its own playbooks only: this run of %s executes here, apart, with its state in %s (runbook runs list --state %s)\n",
		srv, rs.file, file, apart, apart)
	sf.state = apart
	return a.openRunState(ctx, sf)
}

// startRemote starts FILE's playbook on the server and returns the run's
// ID. The server runs the playbooks of its directory only: FILE must be
// one of them, unchanged.
func (a *app) startRemote(ctx context.Context, rr *remoteRun) (string, error) {
	b, name := rr.rs.remote, rr.pb.Name
	var sp api.Playbook
	err := b.do(ctx, http.MethodGet, "/api/v1/playbooks/"+url.PathEscape(name), nil, &sp)
	switch {
	case fault.CodeOf(err) == fault.NotFound:
		return "", &exitError{code: 2,
			err:  fmt.Errorf("%s holds the state file %s and has no playbook named %q: it runs the playbooks of its directory only", rr.srvName, rr.rs.file, name),
			hint: "put " + rr.file + " in the server's playbook directory (it reloads), or run it apart with --state PATH"}
	case err != nil:
		return "", withHint(err, "")
	case sp.Hash != rr.pb.Hash:
		return "", &exitError{code: 2,
			err:  fmt.Errorf("%s holds the state file %s, and its playbook %q (%s) differs from %s", rr.srvName, rr.rs.file, name, sp.File, rr.file),
			hint: "copy " + rr.file + " over " + sp.File + " (the server reloads it), or run it apart with --state PATH"}
	}
	var r api.Run
	if err := b.do(ctx, http.MethodPost, "/api/v1/playbooks/"+url.PathEscape(name)+"/runs", api.StartRequest{Inputs: rr.given}, &r); err != nil {
		return "", withHint(err, startHint(err, rr.file))
	}
	if !rr.detach && !rr.out.json && !rr.quiet {
		fmt.Fprintf(a.stderr, "%s holds the state file: run %s executes there\n", rr.srvName, r.ID)
	}
	return r.ID, nil
}

// resumeRemote asks the server to continue run --resume ID.
func (a *app) resumeRemote(ctx context.Context, rr *remoteRun) (string, error) {
	b := rr.rs.remote
	id, err := resolveRunID(ctx, b, rr.resume)
	if err != nil {
		return "", err
	}
	// Show only what the resume causes.
	evs, err := b.events(ctx, id, 0)
	if err != nil {
		return "", withHint(err, "")
	}
	if n := len(evs); n > 0 {
		rr.after = evs[n-1].Seq
	}
	body := api.ResumeRequest{Inputs: rr.given}
	if err := b.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/resume", body, nil); err != nil {
		return "", withHint(err, "runbook runs show "+id)
	}
	return id, nil
}
