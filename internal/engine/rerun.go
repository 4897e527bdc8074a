package engine

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
)

// Rerun returns what starts a new run of the finished run runID: the
// playbook of its snapshot (what ran, even if the file changed since) and
// a start with its inputs and its trigger, which records "rerun_of" (the
// run) and "rerun_by" (by), so that the new run is whoever reran it's. A
// rerun is a fresh run from the first step, unlike a retry; the caller
// starts it through its run host (StartRun, Execute).
//
// The state never keeps a secret input: the values of the run's secret
// inputs are given again in secretInputs (any other name is refused), and
// a rerun that lacks one is refused, naming it, rather than started with
// the mask for its value. A run that has not ended, and a sub-playbook run
// (its parent is rerun), are refused.
func (e *Engine) Rerun(ctx context.Context, runID string, secretInputs map[string]any, by string) (*playbook.Playbook, StartRequest, error) {
	old, err := e.storedRun(ctx, runID)
	if err != nil {
		return nil, StartRequest{}, err
	}
	switch {
	case !old.Status.Done():
		return nil, StartRequest{}, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
			"run %s is %s; only a run that ended (succeeded, failed, cancelled, skipped) can be run again", old.ID, old.Status)}
	case old.ParentID != "":
		return nil, StartRequest{}, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"run %s is a sub-playbook run: run its parent %s again", old.ID, old.ParentID)}
	}
	pb, err := e.parseSnapshot(old, "rerun")
	if err != nil {
		return nil, StartRequest{}, err
	}
	inputs, err := WithSecretInputs(pb, old, secretInputs)
	if err != nil {
		return nil, StartRequest{}, err
	}
	if missing := maskedSecretInputs(pb, inputs); len(missing) > 0 {
		flags := make([]string, len(missing))
		for i, name := range missing {
			flags[i] = "-i " + name + "=VALUE"
		}
		return nil, StartRequest{}, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
			"run %s was started with secret input %s, whose value the state does not keep: give it again (runbook runs rerun %s %s)",
			old.ID, strings.Join(missing, ", "), old.ID, strings.Join(flags, " "))}
	}
	trig := maps.Clone(old.Trigger)
	if trig == nil {
		trig = map[string]any{}
	}
	delete(trig, "retried_by") // who retried the old run did not start this one
	trig["rerun_of"] = old.ID
	if by != "" {
		trig["rerun_by"] = by
	}
	return pb, StartRequest{Inputs: inputs, Trigger: trig, Delivery: old.Delivery}, nil
}
