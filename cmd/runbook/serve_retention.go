package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/config"
	"github.com/runbook/runbook/internal/state"
)

// retentionEvery is how often serve applies the config's retention:.
const retentionEvery = 24 * time.Hour

// startRetention applies retention to the store now and then daily, until
// the returned stop is called (which waits for a pass under way). Nothing
// runs when retention has no older_than.
func startRetention(ctx context.Context, store state.Store, r config.Retention, logger *slog.Logger) (stop func()) {
	if r.OlderThan <= 0 {
		return func() {}
	}
	statuses := make([]state.RunStatus, len(r.Status))
	for i, s := range r.Status {
		statuses[i] = state.RunStatus(s)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			runs, err := state.Prune(ctx, store, state.PruneOptions{Before: time.Now().Add(-r.OlderThan), Status: statuses})
			if err != nil && ctx.Err() == nil {
				logger.Error("retention: pruning runs failed", "err", err, "older_than", formatAge(r.OlderThan))
			} else if err == nil {
				logger.Info("retention: runs pruned", "runs", len(runs), "older_than", formatAge(r.OlderThan))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retentionEvery):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}
