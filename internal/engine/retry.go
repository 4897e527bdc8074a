package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/suggest"
)

// Retry creates (commits) a new pending run that executes the snapshot of
// run runID again from step from, reusing what the steps before it did;
// the caller then calls Execute with the returned playbook. Only a failed
// or cancelled run can be retried (else a Conflict error); an unknown run
// is NotFound. from must be a step of the playbook's `steps` (not of
// on_failure or finally, else Invalid); empty means the first step that
// did not succeed.
//
// The new run has the old one's snapshot, inputs and trigger, a new ID,
// RetryOf = runID and RetryFrom = from. A step written before from is
// reused — its records (for_each items included) are copied as they are,
// with a step.reused event — when it succeeded in the old run and does not
// depend on from through needs. A step the old run skipped is decided
// again: a skip is no work to keep, and it may have come from the failure
// the retry runs again (a step that had not started when another failed is
// skipped, whatever its own condition). Every other step runs again as a
// new attempt: a mutating one gets a new intent and idempotency key, and
// reused ones are never reconciled. on_failure and finally run as for any
// run.
//
// The copy is a second transaction after the run's creation. Executing or
// resuming a run with RetryOf set first copies whatever is missing (the
// old run no longer changes), so a crash between the two commits never
// runs a reused step again.
func (e *Engine) Retry(ctx context.Context, runID, from string) (*state.Run, *playbook.Playbook, error) {
	old, err := e.storedRun(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	if old.Status != state.RunFailed && old.Status != state.RunCancelled {
		return nil, nil, &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
			"run %s is %s; only a failed or cancelled run can be retried", old.ID, old.Status)}
	}
	pb, err := e.parseSnapshot(old, "retry")
	if err != nil {
		return nil, nil, err
	}
	recs, err := e.o.Store.Steps(ctx, old.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("load steps of run %s: %w", old.ID, err)
	}
	if from, err = retryStart(pb, old.ID, from, recordsByID(recs)); err != nil {
		return nil, nil, err
	}
	if missing := e.missingSecrets(pb); len(missing) > 0 {
		return nil, nil, e.secretsNotSet("retry "+old.ID, missing)
	}
	now := e.o.Clock.Now()
	r := &state.Run{
		ID: newRunID(now), Playbook: old.Playbook, File: old.File, Snapshot: old.Snapshot, Hash: old.Hash,
		Inputs: old.Inputs, Trigger: old.Trigger, Delivery: old.Delivery, Status: state.RunPending,
		RetryOf: old.ID, RetryFrom: from, CreatedAt: now, Sim: e.o.Sim, TakeOver: pb.TakeOver,
	}
	ev := state.Event{Time: now, Type: "run.created",
		Message: fmt.Sprintf("run created for playbook %s: retries run %s from step %s", old.Playbook, old.ID, from),
		Data:    map[string]any{"retry_of": old.ID, "retry_from": from}}
	if err := e.createRun(ctx, r, true, ev); err != nil {
		return nil, nil, err
	}
	e.observe(r.ID, ev)
	if _, err := e.copyReused(ctx, pb, r, nil); err != nil {
		// Execute (or Resume) copies them before running anything.
		e.o.Logger.Warn("copy reused steps", "run_id", r.ID, "err", err)
	}
	return r, pb, nil
}

// retryStart checks from (or picks the first step that did not succeed
// and was not skipped).
func retryStart(pb *playbook.Playbook, oldID, from string, old map[string]*state.StepRecord) (string, error) {
	if from == "" {
		for _, s := range pb.Steps {
			if !passed(old[s.ID]) {
				return s.ID, nil
			}
		}
		return "", &fault.Error{Code: fault.Conflict, Message: fmt.Sprintf(
			"every step of run %s succeeded or was skipped; name the step to retry from", oldID)}
	}
	ids := make([]string, 0, len(pb.Steps))
	for _, s := range pb.Steps {
		if s.ID == from {
			return from, nil
		}
		ids = append(ids, s.ID)
	}
	for _, s := range append(append([]*playbook.Step(nil), pb.OnFailure...), pb.Finally...) {
		if s.ID == from {
			return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
				"step %s is an on_failure or finally step; retry from a step of steps", from)}
		}
	}
	return "", &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf(
		"playbook %s of run %s has no step %q%s", pb.Name, oldID, from, suggest.Hint(from, ids))}
}

// passed reports whether a step's record in the retried run lets a retry
// start after it when no step is named: it succeeded or was skipped.
func passed(rec *state.StepRecord) bool {
	return rec != nil && (rec.Status == state.StepSucceeded || rec.Status == state.StepSkipped)
}

// reusedSteps returns the ids of the steps a retry from step from keeps.
func reusedSteps(pb *playbook.Playbook, from string, old map[string]*state.StepRecord) map[string]bool {
	// again: the steps that run again. from and every step written after
	// it; every step that depends on from (needs may point forward); and
	// every step that did not succeed, skipped ones included (their skip
	// is decided again).
	again := map[string]bool{from: true}
	after := false
	for _, s := range pb.Steps {
		after = after || s.ID == from
		if rec := old[s.ID]; after || rec == nil || rec.Status != state.StepSucceeded {
			again[s.ID] = true
		}
	}
	down := map[string]bool{from: true}
	grow(pb.Steps, down)
	for id := range down {
		again[id] = true
	}
	keep := map[string]bool{}
	for _, s := range pb.Steps {
		if !again[s.ID] {
			keep[s.ID] = true
		}
	}
	return keep
}

// grow adds to set, until nothing changes, every step that depends on a
// step in set.
func grow(list []*playbook.Step, set map[string]bool) {
	for changed := true; changed; {
		changed = false
		for _, s := range list {
			if set[s.ID] {
				continue
			}
			for _, dep := range s.DependsOn {
				if set[dep] {
					set[s.ID], changed = true, true
					break
				}
			}
		}
	}
}

// copyReused copies into retry run r the records of run r.RetryOf that it
// reuses and does not have yet (have, by id), in one transaction with a
// step.reused event per step, and returns what it copied. Copying again
// is harmless: what is there is not copied twice.
func (e *Engine) copyReused(ctx context.Context, pb *playbook.Playbook, r *state.Run, have map[string]*state.StepRecord) ([]*state.StepRecord, error) {
	recs, err := e.o.Store.Steps(ctx, r.RetryOf)
	if err != nil {
		return nil, fmt.Errorf("load steps of run %s: %w", r.RetryOf, err)
	}
	keep := reusedSteps(pb, r.RetryFrom, recordsByID(recs))
	now := e.o.Clock.Now()
	var out []*state.StepRecord
	var evs []state.Event
	for _, rec := range recs {
		base, _, _ := strings.Cut(rec.ID, "[")
		if !keep[base] || have[rec.ID] != nil {
			continue
		}
		c := *rec
		c.RunID = r.ID
		out = append(out, &c)
		if base == rec.ID {
			evs = append(evs, state.Event{Time: now, Type: "step.reused", Step: rec.ID,
				Message: fmt.Sprintf("%s in run %s; reused", rec.Status, r.RetryOf), Data: map[string]any{"run": r.RetryOf}})
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	wctx, stop := e.writeCtx(ctx)
	defer stop()
	if err := e.o.Store.SaveSteps(wctx, out, evs...); err != nil {
		return nil, fmt.Errorf("copy reused steps of run %s: %w", r.RetryOf, err)
	}
	for _, ev := range evs {
		e.observe(r.ID, ev)
	}
	return out, nil
}

func recordsByID(recs []*state.StepRecord) map[string]*state.StepRecord {
	m := make(map[string]*state.StepRecord, len(recs))
	for _, rec := range recs {
		m[rec.ID] = rec
	}
	return m
}
