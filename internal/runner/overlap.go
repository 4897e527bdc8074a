package runner

import (
	"context"
	"errors"
	"slices"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// A schedule's overlap policy (skip, queue, replace) looks at the runs of
// its playbook in flight. A server alone on its store knows them all: the
// runs it holds (Active). A replica asks the store, so that a run another
// replica executes — one it started, or took over from the replica that
// started it — counts as well; replace cancels such a run through the
// store, whose cancel notice stops it on its owner (or its owner's next
// write, which the store refuses: engine/cancelled.go).

var _ trigger.Unfinisher = (*Host)(nil)

// Unfinished implements trigger.Unfinisher: the runs of the playbook this
// server holds, and, on a store shared by replicas, those in flight
// anywhere (state.Coordinator.Unfinished).
func (r *Host) Unfinished(ctx context.Context, playbookName string) ([]string, error) {
	local := r.Active(playbookName)
	if r.rep == nil {
		return local, nil
	}
	ids, err := r.rep.c.Unfinished(ctx, playbookName)
	if err != nil {
		return nil, err
	}
	for _, id := range local {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// cancelElsewhere records run runID, which this replica neither executes
// nor holds, cancelled in the store (a schedule's overlap: replace of a
// run another replica executes): the store's cancel notice stops it on
// its owner. A run that ended meanwhile is left as it is.
func (r *Host) cancelElsewhere(runID string) {
	_, err := r.recordCancelled(runID, "run cancelled by its schedule (overlap: replace)",
		"run cancelled by its schedule (overlap: replace), on replica "+r.rep.id)
	if err != nil && !errors.Is(err, state.ErrEndedMeanwhile) {
		r.log.Error("cannot record the cancellation of a run executing on another replica", "run_id", runID, "err", err)
	}
}
