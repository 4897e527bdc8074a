package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// PruneOptions select the runs Prune deletes.
type PruneOptions struct {
	// Before: runs that ended before it (created before it, for a run
	// without an end time) are deleted.
	Before time.Time
	// Status limits the deletion to runs that ended so; empty means
	// every finished status. A status that is not final selects nothing.
	Status []RunStatus
	// DryRun lists the runs without deleting them.
	DryRun bool
}

// Prune deletes finished runs older than o.Before with everything they
// hold, and the stored bodies of deliveries none of the remaining runs
// refers to, and returns the runs. A sub-playbook run goes with the run at the top
// of its tree, never alone, so a kept run keeps its whole tree. A run that
// is not finished is never deleted, nor is a tree with such a run in it;
// a run that ends or disappears while Prune works is left as it is.
func Prune(ctx context.Context, s Store, o PruneOptions) ([]*Run, error) {
	statuses := o.Status
	if len(statuses) == 0 {
		statuses = []RunStatus{RunSucceeded, RunFailed, RunCancelled, RunSkipped}
	}
	runs, err := s.ListRuns(ctx, RunFilter{Status: statuses})
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	var out []*Run
	for _, r := range runs {
		if r.ParentID != "" || !r.Status.Done() || !endedBefore(r, o.Before) {
			continue
		}
		tree, ok, err := finishedTree(ctx, s, r)
		if err != nil {
			return out, fmt.Errorf("prune: %w", err)
		}
		if !ok {
			continue
		}
		if !o.DryRun {
			// children first: a crash midway never leaves a child whose
			// parent is gone
			for i := len(tree) - 1; i >= 0; i-- {
				err := s.DeleteRun(ctx, tree[i].ID)
				if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotFinished) {
					return out, fmt.Errorf("prune: %w", err)
				}
			}
		}
		out = append(out, r)
	}
	if !o.DryRun {
		// The bodies of deliveries whose runs are all gone, now or by an
		// earlier prune.
		if _, err := s.DeleteUnusedDeliveries(ctx); err != nil {
			return out, fmt.Errorf("prune: %w", err)
		}
	}
	return out, nil
}

func endedBefore(r *Run, t time.Time) bool {
	end := r.EndedAt
	if end.IsZero() {
		end = r.CreatedAt
	}
	return end.Before(t)
}

// finishedTree returns r and its sub-playbook runs, parents before
// children, and whether every one of them is finished.
func finishedTree(ctx context.Context, s Store, r *Run) ([]*Run, bool, error) {
	tree := []*Run{r}
	for i := 0; i < len(tree); i++ {
		children, err := s.ListRuns(ctx, RunFilter{ParentID: tree[i].ID})
		if err != nil {
			return nil, false, err
		}
		if slices.ContainsFunc(children, func(c *Run) bool { return !c.Status.Done() }) {
			return nil, false, nil
		}
		tree = append(tree, children...)
	}
	return tree, true, nil
}
