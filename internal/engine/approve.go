package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// approveMu serializes the answers given in this process, so two answers
// to one step cannot both count as its last (two-person rule). Replicas
// sharing a database each answer under their own lock.
var approveMu sync.Mutex

// Approve records an answer to a waiting approval step. When the answer
// decides the step — a rejection, or the approval that makes the step's
// required count of distinct approvers — a run waiting for it in this
// process (ApprovalWait) continues at once; elsewhere, at its next poll
// (or, parked, when resumed). An approval that leaves approvals missing
// is recorded as pending and the run keeps waiting.
//
// An answer is refused before anything is recorded, the run still
// waiting, when: its By is empty; the step has not asked yet; By (with
// a.Roles) is not one of the step's approvers, or started the run while
// the step does not allow self-approval, or already approved (those are
// Unauthorized, Conflict for the last); or an approval's fields do not fit
// the step's typed fields (Invalid, every problem in Data["problems"]).
// A step that has not asked yet is answered with the defaults (one
// approval, no self-approval) and checks the answer itself.
func (e *Engine) Approve(ctx context.Context, runID, step string, a state.Approval) error {
	approveMu.Lock()
	defer approveMu.Unlock()
	rec, err := e.o.Store.GetStep(ctx, runID, step)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("run %s has no step %q waiting", runID, step)}
		}
		return err
	}
	if rec.Status != state.StepWaiting && rec.Status != state.StepRunning {
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("step %s of run %s is %s, not waiting for approval", step, runID, rec.Status)}
	}
	if !rec.WakeAt.IsZero() {
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
			"step %s of run %s is not an approval: it waits until %s (a sleep, or a task's next poll)", step, runID, rec.WakeAt.UTC().Format(time.RFC3339))}
	}
	prev, err := e.o.Store.GetApproval(ctx, runID, step)
	switch {
	case err == nil && !prev.Pending:
		return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("step %s of run %s is already answered", step, runID)}
	case err == nil:
	case errors.Is(err, state.ErrNotFound):
		prev = &state.Approval{}
	default:
		return err
	}
	if err := checkAnswer(runID, step, rec.Approval, a); err != nil {
		return err
	}
	if err := e.checkAnswerer(ctx, runID, step, rec.Approval, prev, a); err != nil {
		return err
	}
	if a.At.IsZero() {
		a.At = e.o.Clock.Now()
	}
	a.Comment = e.o.Redactor.String(a.Comment)
	answers := append(slices.Clone(prev.Answers), state.ApprovalAnswer{
		By: a.By, Roles: a.Roles, Approved: a.Approved, Comment: a.Comment, Fields: a.Fields, At: a.At})
	required := 1
	if rec.Approval != nil {
		required = max(rec.Approval.Required, 1)
	}
	approvals := 0
	for _, an := range answers {
		if an.Approved {
			approvals++
		}
	}
	a.RunID, a.Step, a.Answers = runID, step, answers
	a.Pending = a.Approved && approvals < required
	if err := e.o.Store.PutApproval(ctx, a); err != nil {
		return err
	}
	verdict := "approved"
	if !a.Approved {
		verdict = "rejected"
	}
	msg := verdict + " by " + a.By
	if required > 1 && a.Approved {
		msg += fmt.Sprintf(" (%d of %d approvals)", approvals, required)
	}
	ev := state.Event{Time: a.At, Type: "approval.answered", Step: step, Message: msg,
		Data: map[string]any{"by": a.By, "approved": a.Approved, "pending": a.Pending}}
	if err := e.o.Store.AppendEvents(ctx, runID, ev); err != nil {
		return err
	}
	e.observe(runID, ev)
	if !a.Pending {
		e.wake(runID)
		e.wakeParked(ctx, runID)
	}
	return nil
}

// checkAnswerer refuses an answer by someone the step does not accept:
// not one of its approvers, the run's starter (unless allowed), or
// someone who already approved.
func (e *Engine) checkAnswerer(ctx context.Context, runID, step string, ask *state.ApprovalRequest, prev *state.Approval, a state.Approval) error {
	if ask == nil {
		ask = &state.ApprovalRequest{} // not asked yet: the defaults
	}
	if !ask.AllowSelfApproval {
		run, err := e.o.Store.GetRun(ctx, runID)
		if err != nil {
			return err
		}
		if by := run.StartedBy(); by != "" && by == a.By {
			return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
				"%s started run %s and may not answer its approval %s (allow_self_approval is false); the run keeps waiting", a.By, runID, step)}
		}
	}
	for _, an := range prev.Answers {
		if an.By == a.By {
			return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
				"%s already approved step %s of run %s; %d distinct approvers are needed", a.By, step, runID, max(ask.Required, 1))}
		}
	}
	return nil
}

// checkAnswer refuses an answer the waiting step would fail on. A step
// that has not yet recorded its request (it is starting) is not checked
// here; the step checks the answer itself (approvers, required count).
func checkAnswer(runID, step string, ask *state.ApprovalRequest, a state.Approval) error {
	if strings.TrimSpace(a.By) == "" {
		return &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("an answer to step %s of run %s must say who gives it (by)", step, runID)}
	}
	if ask == nil {
		return nil // checked by the step itself
	}
	if len(ask.Approvers) > 0 && !slices.ContainsFunc(ask.Approvers, func(entry string) bool { return auth.MatchesApprover(entry, a.By, a.Roles) }) {
		return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
			"step %s of run %s may be answered only by %s, not %q; the run keeps waiting", step, runID, strings.Join(ask.Approvers, ", "), a.By)}
	}
	if !a.Approved {
		return nil // a rejection carries no fields to check
	}
	decl := make(map[string]steps.Field, len(ask.Fields))
	for name, f := range ask.Fields {
		decl[name] = steps.Field{Type: f.Type, Required: f.Required}
	}
	_, problems := steps.CheckAnswer(decl, a.Fields)
	if len(problems) == 0 {
		return nil
	}
	return &fault.Error{Code: fault.Invalid,
		Message: fmt.Sprintf("answer to step %s of run %s refused, the run keeps waiting", step, runID),
		Err:     errors.New(strings.Join(problems, "; ")),
		Data:    map[string]any{"problems": problems}}
}

// answered is the step's view of a decided approval.
func answered(a *state.Approval) steps.ApprovalResponse {
	resp := steps.ApprovalResponse{Approved: a.Approved, By: a.By, Roles: a.Roles, Comment: a.Comment, Fields: a.Fields, At: a.At}
	for _, an := range a.Answers {
		if an.Approved {
			resp.Approvers = append(resp.Approvers, an.By)
		}
	}
	if len(a.Answers) == 0 && a.Approved {
		resp.Approvers = []string{a.By} // an answer of an earlier build
	}
	return resp
}
