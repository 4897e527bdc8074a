package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// runChild runs (or resumes, or reads the result of) the sub-playbook run
// started by step stepID. The child's ID is derived from the parent's and
// the step's, so a resumed parent finds the same child.
func (rs *runState) runChild(ctx context.Context, stepID, path string, inputs map[string]any) (steps.Outputs, error) {
	e := rs.e
	id := childRunID(rs.run.ID, stepID)
	child, err := e.o.Store.GetRun(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		if e.o.Playbooks.Load == nil {
			return nil, &fault.Error{Code: fault.Internal, Message: "sub-playbooks are not available (no loader)"}
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(rs.pb.Dir, path)
		}
		pb, err := e.o.Playbooks.Load(path)
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("load sub-playbook %s", path), Err: err}
		}
		r, err := e.Start(ctx, pb, StartRequest{ID: id, Inputs: inputs, Trigger: map[string]any{"parent": rs.run.ID}, ParentID: rs.run.ID, ParentStep: stepID})
		if err != nil {
			return nil, err
		}
		child, err = e.execute(ctx, pb, r, inputs)
		return childResult(child, err)
	case err != nil:
		return nil, fmt.Errorf("read sub-playbook run %s: %w", id, err)
	case child.Status.Done():
		return childResult(child, nil)
	}
	child, err = e.Resume(ctx, id)
	return childResult(child, err)
}

func childResult(child *state.Run, err error) (steps.Outputs, error) {
	if child == nil {
		return nil, err
	}
	switch child.Status {
	case state.RunSucceeded:
		out := child.Outputs
		if out == nil {
			out = map[string]any{}
		}
		return out, nil
	case state.RunWaiting:
		if !child.WakeAt.IsZero() {
			// The parent wakes when the child is due.
			return nil, &steps.Suspended{Until: child.WakeAt, Why: "sub-playbook run " + child.ID}
		}
		return nil, fault.ErrSuspended
	case state.RunCancelled:
		return nil, &fault.Error{Code: fault.Cancelled, Message: fmt.Sprintf("sub-playbook run %s was cancelled", child.ID)}
	}
	se := &fault.Error{Code: fault.Failed, Message: fmt.Sprintf("sub-playbook run %s %s", child.ID, child.Status)}
	if child.Error != nil {
		se.Message += ": " + child.Error.Message
		se.Data = child.Error.Data
	}
	return nil, se
}
