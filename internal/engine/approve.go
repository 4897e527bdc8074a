package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/steps"
)

// Approve records an answer to a waiting approval step (Answer, without
// saying whether it decided the step).
func (e *Engine) Approve(ctx context.Context, runID, step string, a state.Approval) error {
	_, err := e.Answer(ctx, runID, step, a)
	return err
}

// Answer records an answer to a waiting approval step and reports whether
// it decided the step — a rejection, or the approval that makes the
// step's required count of distinct approvers: the run may go on then. The
// parked run is woken by its host (internal/runner: the host that took
// the answer, or, on another replica, the store's notice of the answer,
// PostgreSQL's, sent when the answer commits; the replica reads what it
// missed when it listens again). An approval that leaves approvals
// missing is recorded as pending and the run keeps waiting.
//
// The answer is a compare-and-set (state.Store.AnswerApproval): it is
// checked against, and added to, the answers recorded when it commits, in
// one transaction with its approval.answered event, so answers given at
// the same time, through any process or replica, are all counted or
// refused, never lost. The first answer that decides the step is the only
// one: an answer that comes after it is refused (Conflict, "already
// answered"), so an accepted rejection always decides the step rejected,
// and exactly one answer completes the required approvals and wakes the
// run. An approval step decides its timeout the same way
// (stepRun.timeOut): an answer after it is refused (Conflict, "timed
// out"). A store that cannot serialize an answer with the others refuses
// it with a Conflict: its caller knows it was not counted.
//
// An answer is refused before anything is recorded, the run still
// waiting, when: its By is empty; the step has not asked yet; By (with
// a.Roles) is not one of the step's approvers, or started the run while
// the step does not allow self-approval, or already answered (those are
// Unauthorized, Conflict for the last); or an approval's fields do not fit
// the step's typed fields (Invalid, every problem in Data["problems"]).
// A step that has not asked yet is answered with the defaults (one
// approval, no self-approval) and checks the answer itself.
func (e *Engine) Answer(ctx context.Context, runID, step string, a state.Approval) (decided bool, err error) {
	run, err := e.o.Store.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return false, noStepWaiting(runID, step)
		}
		return false, err
	}
	if a.At.IsZero() {
		a.At = e.o.Clock.Now()
	}
	a.Comment = e.o.Redactor.String(a.Comment)
	var next *state.Approval // what the last decision recorded, and its event
	var ev state.Event
	err = e.o.Store.AnswerApproval(ctx, runID, step, func(rec *state.StepRecord, prev *state.Approval) (*state.Approval, []state.Event, error) {
		var err error
		next, ev, err = decideAnswer(run, step, rec, prev, a)
		if err != nil {
			return nil, nil, err
		}
		return next, []state.Event{ev}, nil
	})
	if err != nil {
		return false, err
	}
	e.observe(runID, ev)
	return !next.Pending, nil
}

func noStepWaiting(runID, step string) error {
	return &fault.Error{Code: fault.NotFound, Message: fmt.Sprintf("run %s has no step %q waiting", runID, step)}
}

// decideAnswer is Approve's compare-and-set: from the step's record and
// the approval recorded so far (each nil when there is none), the
// approval with answer a added and its approval.answered event, or the
// refusal of a.
func decideAnswer(run *state.Run, step string, rec *state.StepRecord, prev *state.Approval, a state.Approval) (*state.Approval, state.Event, error) {
	runID := run.ID
	switch {
	case rec == nil:
		return nil, state.Event{}, noStepWaiting(runID, step)
	case rec.Status != state.StepWaiting && rec.Status != state.StepRunning:
		return nil, state.Event{}, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("step %s of run %s is %s, not waiting for approval", step, runID, rec.Status)}
	case !rec.WakeAt.IsZero():
		return nil, state.Event{}, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
			"step %s of run %s is not an approval: it waits until %s (a sleep, or a task's next poll)", step, runID, rec.WakeAt.UTC().Format(time.RFC3339))}
	case prev != nil && prev.TimedOut:
		return nil, state.Event{}, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("step %s of run %s timed out before this answer", step, runID)}
	case prev != nil && !prev.Pending:
		return nil, state.Event{}, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf("step %s of run %s is already answered", step, runID)}
	case prev == nil:
		prev = &state.Approval{}
	}
	if err := checkAnswer(runID, step, rec.Approval, a); err != nil {
		return nil, state.Event{}, err
	}
	if err := checkAnswerer(run, step, rec.Approval, prev, a); err != nil {
		return nil, state.Event{}, err
	}
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
	return &a, ev, nil
}

// checkAnswerer refuses an answer by someone the step does not accept:
// the run's starter (unless allowed), or someone who already answered.
func checkAnswerer(run *state.Run, step string, ask *state.ApprovalRequest, prev *state.Approval, a state.Approval) error {
	if ask == nil {
		ask = &state.ApprovalRequest{} // not asked yet: the defaults
	}
	if !ask.AllowSelfApproval {
		if by := run.StartedBy(); by != "" && by == a.By {
			return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
				"%s started run %s and may not answer its approval %s (allow_self_approval is false); the run keeps waiting", a.By, run.ID, step)}
		}
	}
	for _, an := range prev.Answers {
		if an.By == a.By {
			return &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
				"%s already approved step %s of run %s; %d distinct approvers are needed", a.By, step, run.ID, max(ask.Required, 1))}
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
	return resp
}
