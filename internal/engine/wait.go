package engine

import (
	"context"
	"errors"
	"sort"

	"github.com/runbook/runbook/internal/state"
)

// runMain runs the main steps and reports whether the run must park: a
// step waiting for an approval suspends (AwaitApproval returns
// ErrSuspended), its dependents do not start, and the run parks once the
// others settle. When the run was resumed to end (cancelled while parked,
// or past its deadline), the waiting steps end cancelled (or timed out).
func (rs *runState) runMain(ctx context.Context) bool {
	if cause := runCause(ctx); cause != nil && !errors.Is(cause, ErrSuspend) {
		rs.endWaiting(ctx)
	}
	rs.runList(ctx, rs.pb.Steps, phaseMain)
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.waiting || rs.pausedBy != ""
}

// endWaiting finishes the steps still waiting when the run's ctx ended.
func (rs *runState) endWaiting(ctx context.Context) {
	rs.mu.RLock()
	var waiting []*state.StepRecord
	for _, rec := range rs.records {
		if rec.Status == state.StepWaiting {
			waiting = append(waiting, rec)
		}
	}
	rs.mu.RUnlock()
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].ID < waiting[j].ID })
	for _, rec := range waiting {
		rs.endChild(ctx, rec.ID)
		sr := &stepRun{rs: rs, rec: rec}
		sr.finish(ctx, nil, context.Cause(ctx))
	}
}
