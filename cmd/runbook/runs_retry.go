package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

func cmdRunsRetry(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs retry", usage: "RUN_ID [--from STEP] [-i SECRET=VALUE ...] [flags]",
		summary: "Run a failed or cancelled run again as a new run, from a step, keeping the outputs of the steps before it.",
		details: `Without --from the retry starts at the first step that did not succeed
and was not skipped. Steps before it that succeeded (and do not need the
step retried from) are reused as they are; the others run again, and a
step the run skipped has its condition decided again. The new run
executes here with the same progress and exit code as 'runbook run' (0
succeeded, 1 failed or cancelled, 2 usage); through runbook serve the
server executes it and its progress is shown until it ends or waits for
an approval (--detach: print the new run's ID and return). The state file
never keeps a secret input: give the run's secret inputs again with -i
(other inputs are kept).`,
	})
	from := fs.String("from", "", "retry from this `step` (default: the first step that did not succeed and was not skipped)")
	var secretInputs kvList
	fs.Var(&secretInputs, "i", "a secret input `name=value` of the run, given again (repeatable)")
	detach := fs.Bool("detach", false, "through runbook serve: print the new run's ID without following it")
	out := addOutputFlag(fs, "text")
	quiet := fs.Bool("quiet", false, "no progress: print only the outcome")
	o := newRunsOpener(a, fs)
	var sims simFlags
	sims.add(fs)
	var cfgPath string
	runConfigFlag(fs, &cfgPath)
	pos, err := parsePositional(fs, args, 1, 1, "the RUN_ID (runbook runs list --status failed shows them)")
	if err != nil {
		return err
	}
	runID := pos[0]
	given, err := readInputs("", &secretInputs)
	if err != nil {
		return err
	}
	b, runID, err := o.openForRun(ctx, runID)
	if err != nil {
		return err
	}
	defer b.close()
	if api, ok := b.(*apiBackend); ok {
		r, err := api.retry(ctx, runID, *from, given)
		if err != nil {
			return withHint(err, "runbook runs show "+runID)
		}
		if *detach {
			if out.json {
				return writeJSON(a.stdout, map[string]string{"id": r.ID, "retry_of": r.RetryOf, "retry_from": r.RetryFrom})
			}
			// The bare ID on stdout, as run --detach prints it.
			fmt.Fprintf(a.stderr, "run %s retries run %s from step %s; follow it with: runbook runs logs -f %s\n", r.ID, runID, r.RetryFrom, r.ID)
			fmt.Fprintln(a.stdout, r.ID)
			return nil
		}
		return a.followRemote(ctx, api, []string{r.ID}, []uint64{0}, out, *quiet)
	}
	if *detach {
		return usageErrorf("runs retry", "--detach needs runbook serve: without a server the retry runs in this process")
	}
	// The values given for secret inputs are checked before a new run is
	// created.
	return a.startHere(ctx, b.(*storeBackend).store, runID, cfgPath, o, &sims, out, *quiet,
		func(host *runner.Host) (*state.Run, error) { return host.RetryRun(ctx, runID, *from, given, "") })
}

// startHere starts a new run from run runID (a retry, a rerun) through a
// run host of this process, with the config's connections, and follows it
// to its outcome with runbook run's progress and exit code: what the runs
// verbs do when no server holds the state.
func (a *app) startHere(ctx context.Context, store state.Store, runID, cfgPath string, o *runsOpener, sims *simFlags,
	out *outputFlag, quiet bool, start func(*runner.Host) (*state.Run, error)) error {
	prog := a.newProgress(out, quiet, "")
	host, closeHost, err := a.hostHere(ctx, store, runID, cfgPath, o, sims, engine.Observer{Event: prog.observe, Output: prog.output})
	if err != nil {
		prog.close()
		return err
	}
	defer closeHost()
	r, err := start(host)
	if r == nil {
		prog.close()
		return withHint(err, "runbook runs show "+runID)
	}
	if err != nil {
		prog.close()
		if errors.Is(err, state.ErrFenced) {
			return a.notOwned(ctx, store, r.ID, err, nil, out)
		}
		return withHint(err, "runbook run --resume "+r.ID)
	}
	return a.followHere(ctx, store, host, r.ID, prog, out)
}

// hostHere opens a run host of this process on store, for a runs verb
// that executes run runID (or its root) here (runs approve, retry,
// rerun, cancel without a server): the simulators its flags ask for and
// the ones the run recorded, the connections and secrets of the config
// (--config, else ./runbook.yaml) as runbook run takes them, and on a
// database the config's server.lease, as any replica. obs is told what
// the runs do. closeHost closes the host, then the simulators.
func (a *app) hostHere(ctx context.Context, store state.Store, runID, cfgPath string, o *runsOpener, sims *simFlags,
	obs engine.Observer) (host *runner.Host, closeHost func(), err error) {
	sims.remember(ctx, store, runID)
	cfg, err := a.loadRunConfig(cfgPath, "", o.sf)
	if err != nil {
		return nil, nil, err
	}
	src, err := o.secrets()
	if err != nil {
		return nil, nil, err
	}
	conns, stopSim, err := sims.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	if conns.defaults, err = a.configConnections(cfg, src, conns.sim != nil); err != nil {
		stopSim()
		return nil, nil, err
	}
	opts := a.engineOptions(store, src)
	opts.Connection = conns.resolve
	opts.Sim = sims.recorded()
	opts.Observer = obs
	host = a.newHost(opts, configLease(cfg))
	closeHost = func() { host.Close(); stopSim() }
	// On a database: its runs show interrupted once it is gone, on any host.
	if err := host.Open(ctx); err != nil {
		closeHost()
		return nil, nil, withHint(err, "")
	}
	return host, closeHost, nil
}

// followHere follows run runID of this process's host to its end (or its
// next approval) and reports it with runbook run's output and exit code;
// p, the run's progress, is closed once the run returned.
func (a *app) followHere(ctx context.Context, store state.Store, host *runner.Host, runID string, p progress, out *outputFlag) error {
	res, err := follow(ctx, host, runID, false)
	p.close()
	if errors.Is(err, state.ErrFenced) && res != nil {
		return a.notOwned(ctx, store, runID, err, host, out)
	}
	if res == nil {
		return withHint(err, "runbook run --resume "+runID)
	}
	return a.finishRun(ctx, store, res, err, out)
}
