package engine

import (
	"context"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// StartFailed commits a run of pb that could not start (a trigger's
// inputs do not fit, a secret is missing) as failed, with reason as its
// error, so the failure shows in `runs list` and not only in a log line.
// Nothing executes. Inputs and trigger are recorded redacted, secret
// inputs masked, as Prepare records them.
func (e *Engine) StartFailed(ctx context.Context, pb *playbook.Playbook, req StartRequest, reason error) (*state.Run, error) {
	e.registerSecretInputs(pb, req.Inputs)
	now := e.o.Clock.Now()
	r := &state.Run{
		ID: newRunID(now), Playbook: pb.Name, File: pb.Path, Snapshot: pb.Source, Hash: pb.Hash,
		Inputs: e.redactMap(req.Inputs), Trigger: e.redactMap(req.Trigger),
		Status:    state.RunFailed,
		Error:     &state.ErrorRecord{Code: string(fault.CodeOf(reason)), Message: e.o.Redactor.String(reason.Error())},
		CreatedAt: now, EndedAt: now, Sim: e.o.Sim,
	}
	ev := state.Event{Time: now, Type: "run.failed", Message: "run could not start: " + r.Error.Message}
	if err := e.createRun(ctx, r, true, ev); err != nil {
		return nil, err
	}
	e.observe(r.ID, ev)
	return r, nil
}
