package playtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/expr"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/trigger"
)

// start starts the case's run(s): by hand, on a schedule slot, or from
// webhook deliveries through the real intake (deduplication included),
// on the case's run host.
func (cr *caseRun) start(ctx context.Context) {
	if _, err := cr.newHost(ctx); err != nil {
		cr.refused(err)
		return
	}
	t := cr.c.Trigger
	switch {
	case t != nil && len(t.Webhooks) > 0:
		cr.deliver(ctx, t.Webhooks)
	case t != nil && t.Schedule != nil:
		trig, inputs, err := cr.scheduleTrigger(t.Schedule)
		if err != nil {
			cr.refused(err)
			return
		}
		cr.startOne(ctx, inputs, trig)
	default:
		cr.startOne(ctx, cr.inputs, nil)
	}
}

// startOne checks the playbook against the live simulators (as `runbook
// run` does before anything starts), starts the run on the host and
// drives it to its end.
func (cr *caseRun) startOne(ctx context.Context, inputs, trig map[string]any) {
	h := cr.current()
	if err := h.Engine().Preflight(ctx, cr.pb); err != nil {
		cr.refused(err)
		return
	}
	r, err := h.Execute(ctx, cr.pb, engine.StartRequest{Inputs: inputs, Trigger: trig})
	if err != nil {
		cr.refused(err)
		return
	}
	cr.follow(ctx, h, r.ID)
}

// follow records run runID, launched on host h, and drives it in the
// background.
func (cr *caseRun) follow(ctx context.Context, h *runner.Host, runID string) {
	cr.addRun(runID)
	cr.wg.Add(1)
	go func() {
		defer cr.wg.Done()
		cr.drive(ctx, h, runID)
	}()
}

// refused records a run that could not start.
func (cr *caseRun) refused(err error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.runs = append(cr.runs, &RunTrace{Status: "refused", Error: &state.ErrorRecord{Message: err.Error()}})
}

func (cr *caseRun) addRun(id string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.runs = append(cr.runs, &RunTrace{ID: id})
}

// drive follows run id on host h and plays the case's part until it
// ends, as a user of `runbook run` and `runbook runs` would: it resumes a
// killed run on a new host (the next process), answers approvals, and
// retries a failed run when the case says so.
func (cr *caseRun) drive(ctx context.Context, h *runner.Host, id string) {
	for ctx.Err() == nil {
		out, err := h.Await(ctx, id, false)
		switch {
		case errors.Is(err, engine.ErrSuspend):
			if h, err = cr.resume(ctx, id); err != nil {
				cr.problem(Failure{Pos: cr.c.Pos, Message: "the killed run could not be resumed: " + err.Error()})
				return
			}
		case out != nil && out.Status == state.RunWaiting:
			if !cr.answer(ctx, h, id) {
				return
			}
		case out != nil && (out.Status == state.RunFailed || out.Status == state.RunCancelled) && cr.takeRetry():
			rr, rerr := h.RetryRun(ctx, id, cr.c.Retry.From, cr.secretIn, "runbook test")
			if rerr != nil {
				cr.problem(Failure{Pos: cr.c.Retry.Pos, Path: "retry", Message: "retry failed: " + rerr.Error()})
				return
			}
			cr.addRun(rr.ID)
			id = rr.ID
		default:
			return
		}
	}
}

func (cr *caseRun) takeRetry() bool {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.c.Retry == nil || cr.retried {
		return false
	}
	cr.retried = true
	return true
}

// resume continues a killed run on a new host over the same state, as
// the next process would (the concurrency keys of dead processes'
// runs released first, by Open).
func (cr *caseRun) resume(ctx context.Context, id string) (*runner.Host, error) {
	h, err := cr.newHost(ctx)
	if err != nil {
		return nil, err
	}
	return h, h.Continue(ctx, id, cr.secretIn)
}

func (cr *caseRun) problem(f Failure) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.problems = append(cr.problems, f)
}

// answer answers the approval a waiting run (or its sub-playbook run) is
// parked on with the case's first unused answer for that step. It
// reports false when the case has none (the run stays waiting) or the
// answer was refused.
func (cr *caseRun) answer(ctx context.Context, h *runner.Host, runID string) bool {
	owner, step := cr.waitingStep(ctx, runID)
	if step == "" {
		return false
	}
	cr.mu.Lock()
	var a *Approval
	for _, cand := range cr.c.Approvals {
		if cand.Step == step && !cr.used[cand] {
			a = cand
			break
		}
	}
	if a != nil {
		cr.used[a] = true
	}
	cr.mu.Unlock()
	if a == nil {
		return false
	}
	err := h.Approve(ctx, owner, step, state.Approval{Approved: a.Approve, By: a.By, Comment: a.Comment, Fields: a.Fields})
	if err != nil {
		cr.problem(Failure{Pos: a.Pos, Path: "approvals", Message: "the answer was refused: " + err.Error()})
		return false
	}
	return true
}

// waitingStep finds the approval step a waiting run is parked on,
// following sub-playbook runs; it returns the run that owns the step.
func (cr *caseRun) waitingStep(ctx context.Context, runID string) (string, string) {
	for range 16 { // sub-playbooks nest; bound the walk
		recs, err := cr.store.Steps(ctx, runID)
		if err != nil {
			return runID, ""
		}
		step := ""
		for _, rec := range recs {
			if rec.Status == state.StepWaiting {
				step = rec.ID
				break
			}
		}
		if step == "" {
			return runID, ""
		}
		children, _ := cr.store.ListRuns(ctx, state.RunFilter{ParentID: runID})
		next := ""
		for _, c := range children {
			if c.ParentStep == step && c.Status == state.RunWaiting {
				next = c.ID
			}
		}
		if next == "" {
			return runID, step
		}
		runID = next
	}
	return runID, ""
}

// scheduleTrigger builds what a schedule slot's run sees as `trigger`,
// and its inputs: the trigger's `inputs:` over it, then the case's.
func (cr *caseRun) scheduleTrigger(s *ScheduleFire) (map[string]any, map[string]any, error) {
	t := cr.pb.Triggers[s.Index]
	sch := t.Schedule
	slot := s.At
	if slot.IsZero() {
		slots, err := trigger.NextSlots(sch, cr.srv.Clock.Now(), 1)
		if err != nil || len(slots) == 0 {
			return nil, nil, fmt.Errorf("schedule %q: no next slot: %v", sch.Cron, err)
		}
		slot = slots[0]
	}
	loc := sch.Location
	if loc == nil {
		loc = time.UTC
	}
	trig := map[string]any{"type": "schedule", "slot": slot.In(loc).Format(time.RFC3339), "cron": sch.Cron, "late_ms": int64(0)}
	inputs := map[string]any{}
	scope := &expr.Scope{Trigger: trig, Now: cr.srv.Clock.Now}
	for name, v := range t.Inputs {
		val, err := v.Eval(scope)
		if err != nil {
			return nil, nil, fmt.Errorf("trigger input %s: %w", name, err)
		}
		inputs[name] = val
	}
	for k, v := range cr.inputs {
		inputs[k] = v
	}
	return trig, inputs, nil
}

// webhookSecret is the shared secret of the test's webhook routes.
const webhookSecret = "runbook-test-webhook-secret"

// deliver posts each delivery (Times times) to the real webhook intake,
// in order, and records its answers.
func (cr *caseRun) deliver(ctx context.Context, ds []*Delivery) {
	routes := map[string]trigger.Route{}
	for _, d := range ds {
		routes[d.Route] = trigger.Route{Secret: webhookSecret}
	}
	in, err := trigger.NewIntake(trigger.IntakeOptions{
		Routes: routes, Store: cr.store, Starter: &starter{Host: cr.current(), cr: cr, ctx: ctx},
		Playbooks: func() []*playbook.Playbook { return []*playbook.Playbook{cr.pb} },
		Now:       cr.srv.Clock.Now,
	})
	if err != nil {
		cr.refused(err)
		return
	}
	scope := &expr.Scope{Env: cr.env}
	for _, d := range ds {
		body, err := d.Body.Eval(scope)
		if err != nil {
			cr.problem(Failure{Pos: d.Pos, Path: "trigger.webhook.body", Message: err.Error()})
			continue
		}
		raw, err := json.Marshal(body)
		if err != nil {
			cr.problem(Failure{Pos: d.Pos, Path: "trigger.webhook.body", Message: err.Error()})
			continue
		}
		for range d.Times {
			cr.post(ctx, in, d.Route, raw)
		}
	}
}

// post delivers one body and records the intake's answer.
func (cr *caseRun) post(ctx context.Context, in *trigger.Intake, route string, body []byte) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/hooks/"+route, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set(trigger.SignatureHeaders[0], webhookSecret)
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, req)
	answer := "rejected"
	if rec.Code == http.StatusOK {
		var a trigger.Answer
		if json.Unmarshal(rec.Body.Bytes(), &a) == nil {
			answer = a.Status
		}
	}
	cr.mu.Lock()
	cr.deliveries = append(cr.deliveries, answer)
	cr.mu.Unlock()
}

// starter is the intake's trigger.Preparer: the case's run host, as
// `runbook serve`'s is, whose launches are followed. The intake prepares
// each run on the host, commits the runs with the delivery's claims and
// body in one transaction (state.Store.CommitDelivery), then launches
// them; each is driven in the background.
type starter struct {
	*runner.Host
	cr  *caseRun
	ctx context.Context
}

var _ trigger.Preparer = (*starter)(nil)

func (s *starter) Start(ctx context.Context, req trigger.StartRequest) (string, error) {
	id, err := s.Host.Start(ctx, req)
	if err == nil {
		s.cr.follow(s.ctx, s.Host, id)
	}
	return id, err
}

// Launch launches the runs the intake committed and follows them.
func (s *starter) Launch(runs ...*state.Run) {
	s.Host.Launch(runs...)
	for _, r := range runs {
		s.cr.follow(s.ctx, s.Host, r.ID)
	}
}
