package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

var runVerb = &verb{
	name:    "run",
	summary: "run a playbook and show its progress",
	run:     cmdRun,
}

// runFlags are the command line of runbook run.
type runFlags struct {
	inputs                      kvList
	inputsFile, resume, cfgPath string
	out                         *outputFlag
	quiet, wait, detach         bool
	sf                          stateFlags
	sims                        simFlags
	file                        string // "" with --resume alone
}

func parseRunFlags(a *app, args []string) (*runFlags, error) {
	f := &runFlags{}
	fs := newFlagSet(a, command{
		name:    "run",
		usage:   "FILE [-i key=value ...] [flags]",
		summary: "Run a playbook to the end, showing each step as it runs.",
		details: `A run that stops for an approval is parked in the state file; answer it
with 'runbook runs approve RUN_ID STEP'. A run interrupted by a crash or
Ctrl-C continues where it stopped with --resume RUN_ID. The state file
never keeps a secret input: resume a run started with one by giving it
again (--resume RUN_ID -i NAME=VALUE); other inputs cannot change.
While it runs, this process serves 'runbook runs list|show|logs|approve|
cancel' in other terminals on a socket beside the state file; with --wait
it waits for approvals instead of parking. When runbook serve holds the
state file and FILE is one of its playbooks, the run is submitted to it and
followed here; --detach returns once the server has it. A playbook the
server does not have runs here, apart, with its state in STATE.adhoc.db
beside the server's file (said on stderr). On a database
shared with runbook serve replicas, a run they took over while this
process could not renew its lease (take_over: true) stops here at once
and the command exits 3; it goes on there.`,
	})
	fs.Var(&f.inputs, "i", "input `key=value` (repeatable)")
	fs.StringVar(&f.inputsFile, "inputs", "", "read inputs from a JSON or YAML `file` (-i overrides)")
	fs.StringVar(&f.resume, "resume", "", "resume the unfinished run `ID` from its snapshot (FILE is optional)")
	f.out = addOutputFlag(fs, "text")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress: print only the outcome")
	fs.BoolVar(&f.wait, "wait", false, "wait here for approvals instead of parking the run; answer them from another terminal with runbook runs approve")
	fs.BoolVar(&f.detach, "detach", false, "when runbook serve holds the state file: print the ID of the run it starts and return")
	f.sf.addState(fs)
	f.sf.addSecrets(fs)
	f.sims.add(fs)
	runConfigFlag(fs, &f.cfgPath)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if f.resume == "" {
		err = wantArgs(fs, pos, 1, 1, "the playbook FILE")
	} else {
		err = wantArgs(fs, pos, 0, 1, "")
	}
	if err != nil {
		return nil, err
	}
	if len(pos) == 1 {
		f.file = pos[0]
	}
	return f, nil
}

func cmdRun(ctx context.Context, a *app, args []string) error {
	f, err := parseRunFlags(a, args)
	if err != nil {
		return err
	}
	resume, out, sf, sims := f.resume, f.out, &f.sf, &f.sims

	cfg, err := a.loadRunConfig(f.cfgPath, f.file, sf)
	if err != nil {
		return err
	}
	src, err := a.loadSecrets(sf)
	if err != nil {
		return err
	}
	var pb *playbook.Playbook
	if f.file != "" {
		if pb, err = a.load(f.file); err != nil {
			return err
		}
	}
	given, err := readInputs(f.inputsFile, &f.inputs)
	if err != nil {
		return err
	}
	rs, err := a.openRunState(ctx, sf)
	if err != nil {
		return err
	}
	if rs.remote != nil && pb != nil {
		if rs, err = a.apartUnlessServers(ctx, rs, sf, pb, f.file, f.detach); err != nil {
			return err
		}
	}
	if rs.remote != nil {
		return a.runRemote(ctx, &remoteRun{rs: rs, pb: pb, file: f.file, given: given, resume: resume, detach: f.detach, wait: f.wait, out: out, quiet: f.quiet})
	}
	store := rs.store
	defer store.Close()
	if f.detach {
		return usageErrorf("run", "--detach needs a runbook serve holding the state file, which executes the run; this process would be the one executing it")
	}
	if resume != "" {
		if pb != nil {
			a.noteChanged(ctx, store, resume, pb)
		}
		sims.remember(ctx, store, resume)
	}
	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return err
	}
	defer stopSim()
	if conns.defaults, err = a.configConnections(cfg, src, conns.sim != nil); err != nil {
		return err
	}
	prog := a.newProgress(out, f.quiet, resume)
	opts := a.engineOptions(store, src)
	opts.Connection = conns.resolve
	opts.Sim = sims.recorded()
	opts.Observer = engine.Observer{Event: prog.observe, Output: prog.output}
	local := a.startLocal(rs, runPlaybookName(pb))
	if local != nil {
		opts.Observer.Event = func(runID string, ev state.Event) {
			prog.observe(runID, ev)
			local.Observe(runID, ev)
		}
	}
	host := a.newHost(opts, configLease(cfg))
	if local != nil {
		if err := local.Start(host); err != nil {
			fmt.Fprintf(a.stderr, "warning: runs verbs cannot reach this run beside it: %v\n", err)
		}
		defer local.Close()
	}
	// On a database it joins the replicas: its runs show interrupted once
	// it is gone, on any host, and no step starts while its lease lapsed
	// (newHost).
	err = host.Open(ctx)
	defer host.Close()
	if err != nil {
		prog.close()
		return withHint(err, "")
	}
	if resume == "" {
		// Limits only the live service knows (supported versions) are
		// checked before anything starts, reported like load errors.
		if err := host.Engine().PreflightInputs(ctx, pb, given); err != nil {
			prog.close()
			fmt.Fprintln(a.stderr, strings.TrimRight(a.redactor.String(err.Error()), "\n"))
			return &exitError{code: 2, err: err, quiet: true, hint: "the service's own limits are checked before every run; fix the value and run again"}
		}
	}
	r, claimed, err := executeHere(ctx, host, pb, resume, given, f.wait)
	prog.close()
	switch {
	case !claimed && errors.Is(err, state.ErrFenced):
		id := resume
		if r != nil {
			id = r.ID
		}
		return a.notOwned(ctx, store, id, err, nil, out)
	case errors.Is(err, state.ErrFenced) && r != nil:
		return a.notOwned(ctx, store, r.ID, err, host, out)
	}
	if r == nil {
		hint := "runbook runs list"
		if resume == "" {
			hint = startHint(err, f.file)
		}
		return withHint(err, hint)
	}
	return a.finishRun(ctx, store, r, err, out)
}

// executeHere executes a run in this process's run host: run resume (an
// ID), or a new run of pb, and follows it until it ends, or, without
// wait, until it waits for an approval. The run is made this process's
// first (a conditional claim on a database), so that its writes pass the
// fence from the first one; claimed is false when it could not be (err
// says why: a state.ErrFenced names the process that owns it).
func executeHere(ctx context.Context, host *runner.Host, pb *playbook.Playbook, resume string, given map[string]any, wait bool) (r *state.Run, claimed bool, err error) {
	id := resume
	if resume != "" {
		// Only secret inputs, which the state file does not keep.
		if err := host.Continue(ctx, resume, given); err != nil {
			return nil, false, err
		}
	} else {
		r, err := host.Execute(ctx, pb, engine.StartRequest{Inputs: given})
		if err != nil {
			return r, r == nil, err
		}
		id = r.ID
	}
	r, err = follow(ctx, host, id, wait)
	return r, true, err
}

// runPlaybookName names the playbook a run executes, "" for a resume
// without FILE.
func runPlaybookName(pb *playbook.Playbook) string {
	if pb == nil {
		return ""
	}
	return pb.Name
}

// load loads a playbook, printing its diagnostics (exit 2) when invalid.
func (a *app) load(path string) (*playbook.Playbook, error) {
	pb, err := loadPlaybook(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &exitError{code: 2, err: err, hint: "runbook run PATH/TO/playbook.yaml"}
		}
		fmt.Fprintln(a.stderr, strings.TrimRight(a.redactor.String(err.Error()), "\n"))
		return nil, &exitError{code: 2, err: err, quiet: true, hint: "runbook steps TYPE shows the params of a step type; runbook validate " + path + " checks a playbook"}
	}
	return pb, nil
}

// noteChanged warns when the playbook file differs from the snapshot the
// run is resumed from.
func (a *app) noteChanged(ctx context.Context, store state.Store, runID string, pb *playbook.Playbook) {
	r, err := store.GetRun(ctx, runID)
	if err != nil || r.Hash == "" || r.Hash == pb.Hash {
		return
	}
	fmt.Fprintf(a.stderr, "note: %s changed since run %s started; resuming from the snapshot the run started with\n", pb.Path, runID)
}

// readInputs merges an inputs file (JSON or YAML object) and -i pairs.
// -i values are strings; the engine converts them to the declared types.
func readInputs(file string, kv *kvList) (map[string]any, error) {
	given := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("read inputs: %w", err), hint: "runbook run FILE --inputs inputs.json"}
		}
		var m map[string]any
		switch strings.ToLower(filepath.Ext(file)) {
		case ".json":
			err = json.Unmarshal(b, &m)
		default:
			err = yaml.Unmarshal(b, &m)
		}
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("read inputs from %s: want a JSON or YAML object: %w", file, err), hint: "runbook run FILE --inputs inputs.json"}
		}
		for k, v := range m {
			given[k] = v
		}
	}
	for k, v := range kv.strings() {
		given[k] = v
	}
	return given, nil
}

// newProgress picks the display: none for JSON or --quiet, a live list on
// a terminal, plain lines otherwise.
func (a *app) newProgress(out *outputFlag, quiet bool, root string) progress {
	if out.json || quiet {
		return nopProgress{}
	}
	if f, ok := a.stdout.(*os.File); ok && isTerminal(f) {
		return newLiveProgress(f, a.redactor, root)
	}
	return newPlainProgress(a.stdout, a.redactor, root)
}

type nopProgress struct{}

func (nopProgress) observe(string, state.Event) {}
func (nopProgress) close()                      {}

// runDocument is the --output json document of run and runs show.
type runDocument struct {
	Run   *state.Run          `json:"run"`
	Steps []*state.StepRecord `json:"steps"`
}

// finishRun reports the outcome of an executed run and returns the error
// that gives the exit code: 0 succeeded, waiting or skipped; 1 failed or
// cancelled.
func (a *app) finishRun(ctx context.Context, store state.Store, r *state.Run, runErr error, out *outputFlag) error {
	if !r.Status.Done() && r.Status != state.RunWaiting {
		// the engine stopped without a final status: a store error
		return withHint(runErr, "runbook run --resume "+r.ID)
	}
	if out.json {
		doc, err := runDoc(ctx, store, r)
		if err != nil {
			return withHint(err, "")
		}
		if err := writeJSON(a.stdout, doc); err != nil {
			return err
		}
		if r.Status == state.RunFailed || r.Status == state.RunCancelled {
			return errSilent(1)
		}
		return nil
	}
	dur := formatDuration(r.EndedAt.Sub(r.StartedAt))
	switch r.Status {
	case state.RunSucceeded:
		fmt.Fprintf(a.stdout, "run %s succeeded in %s\n", r.ID, dur)
		return nil
	case state.RunSkipped:
		fmt.Fprintf(a.stdout, "run %s skipped: %s\n", r.ID, a.redactor.String(errorText(r.Error)))
		return nil
	case state.RunWaiting:
		runID, step := waitingApproval(ctx, store, r.ID)
		fmt.Fprintf(a.stdout, "run %s is waiting for approval of step %s; answer with: %s\n", r.ID, step, approveCommand(ctx, &storeBackend{store: store}, runID, step))
		return nil
	case state.RunCancelled:
		if r.Error != nil && r.Error.Code != string(fault.Cancelled) {
			// stopped by the engine for a reason the user can act on
			fmt.Fprintf(a.stdout, "run %s cancelled: %s\n", r.ID, a.redactor.String(r.Error.Message))
			return &exitError{code: 1, err: errors.New("cancelled"), quiet: true}
		}
		fmt.Fprintf(a.stdout, "run %s cancelled after %s\n", r.ID, dur)
		return &exitError{code: 1, err: errors.New("cancelled"), quiet: true, hint: "runbook runs show " + r.ID}
	}
	fmt.Fprintf(a.stdout, "run %s failed after %s: %s\n", r.ID, dur, a.redactor.String(errorText(r.Error)))
	return &exitError{code: 1, err: errors.New("failed"), quiet: true, hint: "runbook runs show " + r.ID}
}

func errorText(e *state.ErrorRecord) string {
	if e == nil {
		return "no error recorded"
	}
	return e.Message
}

// runDoc reads a run and its steps for JSON output, without the playbook
// snapshot and the steps' internal checkpoints.
func runDoc(ctx context.Context, store state.Store, r *state.Run) (*runDocument, error) {
	fresh, err := store.GetRun(ctx, r.ID)
	if err == nil {
		r = fresh
	}
	recs, err := store.Steps(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	cp := *r
	cp.Snapshot = nil
	for _, rec := range recs {
		rec.Checkpoint = nil
	}
	if recs == nil {
		recs = []*state.StepRecord{}
	}
	return &runDocument{Run: &cp, Steps: recs}, nil
}

// waitingApproval finds the approval step a waiting run is parked on,
// following sub-playbook runs: it returns the run that owns the step.
func waitingApproval(ctx context.Context, store state.Store, runID string) (string, string) {
	for range 16 { // sub-playbooks nest; bound the walk
		recs, err := store.Steps(ctx, runID)
		if err != nil {
			return runID, "?"
		}
		var step string
		for _, rec := range recs {
			if rec.Status == state.StepWaiting {
				step = rec.ID
				break
			}
		}
		if step == "" {
			return runID, "?"
		}
		children, err := store.ListRuns(ctx, state.RunFilter{ParentID: runID})
		next := ""
		if err == nil {
			for _, c := range children {
				if c.ParentStep == step && c.Status == state.RunWaiting {
					next = c.ID
					break
				}
			}
		}
		if next == "" {
			return runID, step
		}
		runID = next
	}
	return runID, "?"
}
