package main

import (
	"context"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/yamlnode"
)

func cmdRunsPrune(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet(a, command{
		name: "runs prune", usage: "--older-than AGE [--status s] [--dry-run]",
		summary: "Delete finished runs that ended longer ago than AGE, with their steps, events, intents and approvals.",
		details: `A run that is not finished (pending, running, waiting) is never deleted.
A sub-playbook run goes with the run that started it, and a tree with an
unfinished run in it is kept whole. AGE is a duration: 30d, 12h, 90m.
runbook serve does the same every day by the retention: setting of its
config (docs/config.md); while it holds the state file, prune through it
by setting that, or stop it first.`,
	})
	olderThan := fs.String("older-than", "", "delete runs that ended longer ago than `AGE` (e.g. 30d)")
	var status statusList
	fs.Var(&status, "status", "only runs that ended with this `status` (comma separated or repeated; default: every finished status)")
	dryRun := fs.Bool("dry-run", false, "list the runs that would be deleted, delete nothing")
	out := addOutputFlag(fs, "text")
	o := newRunsOpener(a, fs)
	_, err := parsePositional(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	if *olderThan == "" {
		return usageErrorf("runs prune", "--older-than AGE is required (e.g. --older-than 30d)")
	}
	age, err := yamlnode.ParseDuration(*olderThan)
	if err != nil || age <= 0 {
		return usageErrorf("runs prune", "--older-than %q: want a duration longer than 0 (e.g. 30d, 12h)", *olderThan)
	}
	for _, st := range status {
		if !st.Done() {
			return usageErrorf("runs prune", "--status %s: only finished runs are pruned (succeeded, failed, cancelled, skipped)", st)
		}
	}
	b, err := o.open(ctx)
	if err != nil {
		return err
	}
	if b == nil {
		return a.reportPruned(nil, *dryRun, age, out)
	}
	defer b.close()
	if api, ok := b.(*apiBackend); ok {
		if api.local != "" {
			return &exitError{code: 1, err: fmt.Errorf("%s holds the state file", api.name()), hint: "run runbook runs prune again when it has ended"}
		}
		return &exitError{code: 1, err: fmt.Errorf("runbook serve at %s holds the state file", api.base),
			hint: "set retention: in its config (it prunes daily, docs/config.md), or stop it and run runbook runs prune again"}
	}
	store := b.(*storeBackend).store
	runs, err := state.Prune(ctx, store, state.PruneOptions{Before: time.Now().Add(-age), Status: status, DryRun: *dryRun})
	if err != nil {
		return withHint(err, "")
	}
	return a.reportPruned(runs, *dryRun, age, out)
}

// reportPruned prints the runs prune deleted (or would delete).
func (a *app) reportPruned(runs []*state.Run, dryRun bool, age time.Duration, out *outputFlag) error {
	if out.json {
		type pruned struct {
			ID       string          `json:"id"`
			Playbook string          `json:"playbook"`
			Status   state.RunStatus `json:"status"`
			EndedAt  time.Time       `json:"ended_at,omitzero"`
		}
		doc := struct {
			DryRun bool     `json:"dry_run"`
			Runs   []pruned `json:"runs"`
		}{DryRun: dryRun, Runs: []pruned{}}
		for _, r := range runs {
			doc.Runs = append(doc.Runs, pruned{r.ID, r.Playbook, r.Status, r.EndedAt})
		}
		return writeJSON(a.stdout, doc)
	}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	for _, r := range runs {
		fmt.Fprintf(a.stdout, "%s run %s  %s  %s  ended %s\n", verb, r.ID, r.Playbook, r.Status, r.EndedAt.Local().Format(time.DateTime))
	}
	fmt.Fprintf(a.stdout, "%d finished run(s) older than %s %s\n", len(runs), formatAge(age), map[bool]string{true: "would be deleted", false: "deleted"}[dryRun])
	return nil
}

// formatAge prints a prune age in whole days when it is some.
func formatAge(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
