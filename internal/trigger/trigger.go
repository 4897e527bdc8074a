// Package trigger starts runs from outside: the cron scheduler (schedule
// triggers) and the webhook intake (webhook triggers). Both hand runs to a
// Starter, which `runbook serve` implements over the engine; neither
// imports the engine.
//
// Durability: a schedule records each slot it fired (a cursor in the
// state store) before starting the run, so a restart neither repeats a
// slot nor drops one silently; a webhook delivery is answered only after
// its deduplication keys, its body and the runs it starts are committed in
// one transaction (through a Preparer).
package trigger

import (
	"context"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Starter starts runs for triggers. `runbook serve` implements it over the
// engine: Start validates inputs (the same checks as the CLI), commits the
// run record, and executes it in the background.
type Starter interface {
	// Start commits a new run of pb and returns its ID once the record is
	// durable; the run executes asynchronously.
	Start(ctx context.Context, req StartRequest) (runID string, err error)
	// Active lists the runs of the named playbook executing now (for the
	// overlap policies; see Unfinisher).
	Active(playbookName string) []string
	// Cancel cancels a run Active (or Unfinished) listed.
	Cancel(runID string)
}

// Unfinisher is implemented by a Starter whose store other processes
// execute runs from too (replicas of runbook serve on one database): the
// overlap policies then ask it for the unfinished runs of a playbook
// wherever they execute, instead of Active (this process's). Cancel must
// then cancel a run executing elsewhere too (through the store).
type Unfinisher interface {
	Unfinished(ctx context.Context, playbookName string) ([]string, error)
}

// FailRecorder is implemented by a Starter that records a run that could
// not start: the scheduler then leaves a failed run record carrying the
// reason and the trigger, seen in `runs list`, not only a log line.
type FailRecorder interface {
	// StartFailed commits a failed run of req.Playbook with reason as its
	// error and returns its ID; nothing executes. An empty ID and no
	// error: it declined (the process is stopping, say).
	StartFailed(ctx context.Context, req StartRequest, reason error) (runID string, err error)
}

// Preparer lets the caller commit the runs it starts: the webhook intake
// commits a delivery's claims, runs, body and done record in one
// transaction (state.Store.CommitDelivery, on the Store the Preparer's
// runs belong to), and a scheduler with a Leader a slot's claim with its
// run. `runbook serve`'s runner and `runbook test`'s case both implement it.
type Preparer interface {
	// Prepare validates req as Start does and returns the run record and
	// first events to commit; nothing is committed or executed. A run
	// prepared but never launched (its delivery was a duplicate, or the
	// commit failed) must cost the Preparer nothing lasting.
	Prepare(ctx context.Context, req StartRequest) (*state.Run, []state.Event, error)
	// Launch executes runs that were prepared and then committed, in the
	// background. The records are the executor's from then on: a caller
	// that answers with one copies it first.
	Launch(runs ...*state.Run)
}

// StartRequest is one run a trigger starts.
type StartRequest struct {
	Playbook *playbook.Playbook
	Inputs   map[string]any
	// Trigger is what the run sees as `trigger`: for a schedule
	// {"type": "schedule", "slot": RFC3339 time, "cron": ..., "late_ms": n};
	// for a webhook {"type": "webhook", "route", "event", "payload",
	// "hook" (with each: hook), "delivery" (hooksId)}.
	Trigger map[string]any
	// Delivery, set by the webhook intake, refers to the
	// delivery's body stored with the runs (state.Delivery.Body): Trigger
	// then lacks "payload" and "hook", which the run resolves from it.
	Delivery *state.DeliveryRef
}

// PayloadRedactor is implemented by a Preparer whose run records are
// redacted: the webhook intake passes a delivery's payload through it,
// once every unit is prepared, before storing it as the delivery's body,
// as each run's trigger was redacted when it carried the payload.
type PayloadRedactor interface {
	RedactPayload(v any) any
}
