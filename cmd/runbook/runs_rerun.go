package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

func cmdRunsRerun(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs rerun", usage: "RUN_ID [-i SECRET=VALUE ...] [--wait] [flags]",
		summary: "Start a new run of a run that ended (succeeded, failed, cancelled) with its inputs, recorded as a rerun of it.",
		details: `The new run executes the playbook as the run had it (its snapshot, even if
the file changed since) from its first step, with the run's inputs and
trigger; it records rerun_of (runs show prints it) and is started by you.
Unlike 'runbook runs retry' nothing of the old run is reused. The state never
keeps a secret input: give the run's secret inputs again with -i (other
inputs are kept); a rerun without one is refused, naming it.
Through runbook serve the server executes it: the new run's ID is printed,
and --wait follows it to its end with the exit code of 'runbook run'.
Without a server it runs here, as 'runbook run' does.`,
	})
	var secretInputs kvList
	fs.Var(&secretInputs, "i", "a secret input `name=value` of the run, given again (repeatable)")
	wait := fs.Bool("wait", false, "through runbook serve: follow the new run until it ends")
	out := addOutputFlag(fs, "text")
	quiet := fs.Bool("quiet", false, "no progress: print only the outcome")
	o := newRunsOpener(a, fs)
	var cfgPath string
	runConfigFlag(fs, &cfgPath)
	var sims simFlags
	sims.add(fs)
	pos, err := parsePositional(fs, args, 1, 1, "the RUN_ID (runbook runs list shows them)")
	if err != nil {
		return err
	}
	given, err := readInputs("", &secretInputs)
	if err != nil {
		return err
	}
	b, runID, err := o.openForRun(ctx, pos[0])
	if err != nil {
		return err
	}
	defer b.close()
	if api, ok := b.(*apiBackend); ok {
		r, err := api.rerun(ctx, runID, given)
		if err != nil {
			return withHint(err, "runbook runs show "+runID)
		}
		if !*wait {
			if out.json {
				return writeJSON(a.stdout, map[string]string{"id": r.ID, "rerun_of": runID})
			}
			fmt.Fprintf(a.stdout, "run %s runs run %s again; follow it with: runbook runs logs -f %s\n", r.ID, runID, r.ID)
			return nil
		}
		return a.followRemote(ctx, api, []string{r.ID}, []uint64{0}, out, *quiet)
	}
	return a.startHere(ctx, b.(*storeBackend).store, runID, cfgPath, o, &sims, out, *quiet,
		func(host *runner.Host) (*state.Run, error) {
			pb, req, err := host.Engine().Rerun(ctx, runID, given, localName())
			if err != nil {
				return nil, err
			}
			return host.Execute(ctx, pb, req)
		})
}

func (b *apiBackend) rerun(ctx context.Context, id string, secretInputs map[string]any) (*state.Run, error) {
	var r api.Run
	err := b.do(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/rerun", api.RerunRequest{Inputs: secretInputs}, &r)
	if err != nil {
		return nil, err
	}
	return r.Run, nil
}
