package runner

import (
	"context"

	"github.com/runbook/runbook/internal/state"
)

// Notices missed. Approvals and cancels reach the replica executing a
// run only through the store's notices, which are lost while the
// replica's notice connection is down. Each time Listen listens again
// (its NoticeListening), before any later notice is handled, the replica
// reads what those notices would have said about the runs it holds
// (Coordinator.Missed, one query for all of them and their sub-playbook
// runs) and acts as if it had heard them: a run recorded cancelled is
// stopped (cancelNotice), a run waiting on an approval that was answered
// goes on (notice). What happens after the reconnect arrives as notices.

// reconcile acts on the notices missed while this replica did not listen
// (the first listen after start finds it holds no run).
func (r *Host) reconcile(ctx context.Context) {
	ids := r.heldRuns()
	if len(ids) == 0 {
		return
	}
	m, err := r.rep.c.Missed(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("cannot read what the missed notices said; the runs see it at their next wake", "err", err)
		}
		return
	}
	if len(m.Cancelled)+len(m.Answered) > 0 {
		r.log.Info("acting on notices missed while not listening", "cancelled", len(m.Cancelled), "answered", len(m.Answered))
	}
	for _, id := range m.Cancelled {
		r.cancelNotice(ctx, id)
	}
	for _, id := range m.Answered {
		r.notice(ctx, state.Notice{Kind: state.NoticeApproval, RunID: id})
	}
}

// heldRuns lists the top-level runs this runner holds: executing,
// queued for a slot or parked.
func (r *Host) heldRuns() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.active))
	for id := range r.active {
		ids = append(ids, id)
	}
	return ids
}
