package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// maxCandidates is how many runs an ambiguous run ID prefix lists.
const maxCandidates = 10

// resolveRunID returns the ID of the run that id names: the run whose
// whole ID it is, else the one run whose ID starts with it. No match is
// "no run" (exit 1); several are a usage error (exit 2) listing up to
// maxCandidates of them, newest first.
func resolveRunID(ctx context.Context, b runsBackend, id string) (string, error) {
	if id == "" {
		return "", &exitError{code: 2, err: fmt.Errorf("empty RUN_ID"), hint: "runbook runs list"}
	}
	runs, err := b.withPrefix(ctx, id, maxCandidates+1)
	if err != nil {
		return "", withHint(err, "")
	}
	for _, r := range runs {
		if r.ID == id {
			return id, nil
		}
	}
	switch len(runs) {
	case 0:
		return "", &exitError{code: 1, err: fmt.Errorf("no run %q", id), hint: "runbook runs list"}
	case 1:
		return runs[0].ID, nil
	}
	// id may still be a whole ID listed past the candidates.
	if r, err := b.get(ctx, id); err == nil {
		return r.ID, nil
	}
	var lines []string
	for i, r := range runs {
		if i == maxCandidates {
			lines = append(lines, "…")
			break
		}
		lines = append(lines, fmt.Sprintf("%s  %s  %s", r.ID, r.Playbook, r.Status))
	}
	return "", &exitError{code: 2,
		err:  fmt.Errorf("run ID prefix %q is ambiguous; it matches:\n  %s", id, strings.Join(lines, "\n  ")),
		hint: "give more characters of the run ID (runbook runs list shows them)"}
}

// withPrefix returns up to limit runs whose ID starts with prefix, newest
// first; the run whose whole ID is prefix comes alone.
func (b *storeBackend) withPrefix(ctx context.Context, prefix string, limit int) ([]*state.Run, error) {
	if r, err := b.store.GetRun(ctx, prefix); err == nil {
		return []*state.Run{r}, nil
	}
	all, err := b.store.ListRuns(ctx, state.RunFilter{})
	if err != nil {
		return nil, err
	}
	return runsWithPrefix(all, prefix, limit), nil
}

// withPrefix asks the server for the runs whose ID starts with prefix
// (docs/api.md, GET /api/v1/runs?prefix=).
func (b *apiBackend) withPrefix(ctx context.Context, prefix string, limit int) ([]*state.Run, error) {
	q := api.RunQuery{Prefix: prefix, Children: true, Limit: limit}
	var out api.RunList
	if err := b.do(ctx, http.MethodGet, "/api/v1/runs?"+q.Values().Encode(), nil, &out); err != nil {
		return nil, err
	}
	// A server that predates the parameter lists every run: filter here too.
	return runsWithPrefix(records(out.Runs), prefix, limit), nil
}

func runsWithPrefix(runs []*state.Run, prefix string, limit int) []*state.Run {
	var out []*state.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, prefix) {
			out = append(out, r)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}
