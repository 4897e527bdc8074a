package api

import (
	"time"

	"github.com/runbook/runbook/internal/state"
)

// ErrorBody is the body of every error answer of the API.
type ErrorBody struct {
	Error string `json:"error"`
	// Code is a fault code: invalid, unauthorized, not_found, conflict,
	// unavailable or internal.
	Code string `json:"code"`
	// Problems lists diagnostics (invalid inputs, playbook problems).
	Problems []string `json:"problems,omitempty"`
	// Permission is, in a 403, the permission the caller lacks.
	Permission string `json:"permission,omitempty"`
}

// Playbook is a loaded playbook.
type Playbook struct {
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	File        string    `json:"file"`
	Hash        string    `json:"hash"`
	Inputs      []Input   `json:"inputs"`
	Triggers    []Trigger `json:"triggers"`
	// Steps are shown by GET /api/v1/playbooks/{name} only.
	Steps []PlaybookStep `json:"steps,omitempty"`
	// Active are the IDs of the runs of the playbook this server executes.
	Active []string `json:"active_runs"`
	// Paused is the run pause that holds its runs, if any (the oldest
	// when several select it).
	Paused *state.RunPause `json:"paused,omitempty"`
}

// Input is an input a playbook declares. A secret input never shows its
// default.
type Input struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Default     any    `json:"default,omitempty"`
	Enum        []any  `json:"enum,omitempty"`
	Description string `json:"description,omitempty"`
	Secret      bool   `json:"secret,omitempty"`
}

// Trigger is a schedule or a webhook trigger of a playbook.
type Trigger struct {
	Type     string `json:"type"` // schedule or webhook
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Overlap  string `json:"overlap,omitempty"`
	// Next are the next fire times (RFC 3339, in the schedule's zone),
	// shown by GET /api/v1/playbooks/{name} only.
	Next   []string `json:"next,omitempty"`
	Route  string   `json:"route,omitempty"`
	Events []string `json:"events,omitempty"`
	Each   string   `json:"each,omitempty"`
}

// PlaybookStep is a step of a playbook.
type PlaybookStep struct {
	ID   string `json:"id"`
	Uses string `json:"uses"`
	Name string `json:"name,omitempty"`
}

// PlaybookList answers GET /api/v1/playbooks.
type PlaybookList struct {
	Playbooks []Playbook `json:"playbooks"`
	LoadedAt  time.Time  `json:"loaded_at"`
	// ReloadProblems are the diagnostics of the last reload attempt when
	// it was refused (the playbooks listed stay in use).
	ReloadProblems []string `json:"reload_problems,omitempty"`
}

// Run is a run as the API shows it.
type Run struct {
	*state.Run
	// Snapshot hides the record's playbook source: the API never sends it.
	Snapshot any `json:"snapshot,omitempty"`
	// Executing says whether the answering server executes the run now,
	// a run it holds parked included.
	Executing bool `json:"executing"`
	// Parked says the answering server holds the run parked: waiting with
	// no goroutine and no slot until it is due or woken.
	Parked bool `json:"parked,omitempty"`
	// Steps are shown by GET /api/v1/runs/{id} only.
	Steps []RunStep `json:"steps,omitempty"`
	// WaitingFor names the approval step the run waits on, if any.
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	// Hint is the command that continues an interrupted run.
	Hint string `json:"hint,omitempty"`
	// RerunOf is the run this one runs again (state.Run.RerunOf).
	RerunOf string `json:"rerun_of,omitempty"`
}

// RunStep is the record of one step of a run (one per for_each item). A
// step that is running has one (status running, its attempt, its start);
// what it printed so far is at GET /api/v1/runs/{id}/output?step=ID
// (OutputPage). In a run shown interrupted, a step recorded running was
// running when the process stopped: nothing runs it.
type RunStep struct {
	*state.StepRecord
	// Checkpoint hides the record's resume data: it is the engine's.
	Checkpoint any `json:"checkpoint,omitempty"`
}

// WaitingFor is the approval a run waits on.
type WaitingFor struct {
	Step string `json:"step"`
}

// RunList answers GET /api/v1/runs (RunQuery): runs newest first and the
// cursor of the next (older) page.
type RunList struct {
	Runs []Run `json:"runs"`
	// Next is the value of `before` that lists the following page; empty
	// when this page is the last.
	Next string `json:"next,omitempty"`
}

// EventPage answers GET /api/v1/runs/{id}/events: a page of the run's event
// log, oldest first, and the run's status.
type EventPage struct {
	Events []state.Event   `json:"events"`
	Status state.RunStatus `json:"status"`
}

// StreamEnd is the data of the "end" event that closes the Server-Sent
// Events of GET /api/v1/runs/{id}/logs: the run's final status.
type StreamEnd struct {
	Status state.RunStatus `json:"status"`
}

// StartRequest is the body of POST /api/v1/playbooks/{name}/runs.
type StartRequest struct {
	Inputs map[string]any `json:"inputs,omitempty"`
}

// ApproveRequest is the body of POST /api/v1/runs/{id}/approve.
type ApproveRequest struct {
	// Step may be empty when the run waits on exactly one approval.
	Step string `json:"step,omitempty"`
	// Approve is required: true approves, false rejects.
	Approve *bool `json:"approve"`
	// By is who answers (default "api").
	By      string         `json:"by,omitempty"`
	Comment string         `json:"comment,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// RetryRequest is the body of POST /api/v1/runs/{id}/retry.
// RerunRequest is the body of POST /api/v1/runs/{id}/rerun.
type RerunRequest struct {
	// Inputs are the run's secret inputs, which the state does not keep:
	// a rerun of a run that had one needs it again.
	Inputs map[string]any `json:"inputs,omitempty"`
}

type RetryRequest struct {
	// From is the step to retry from; empty: the first that did not
	// succeed.
	From string `json:"from,omitempty"`
	// Inputs are the run's secret inputs, which the state file does not
	// keep.
	Inputs map[string]any `json:"inputs,omitempty"`
}

// ResumeRequest is the body of POST /api/v1/runs/{id}/resume.
type ResumeRequest struct {
	// Inputs are the run's secret inputs, which the state file does not
	// keep.
	Inputs map[string]any `json:"inputs,omitempty"`
}

// CancelAnswer answers POST /api/v1/runs/{id}/cancel.
type CancelAnswer struct {
	ID     string `json:"id"`
	Status string `json:"status"` // cancelling
}

// ApproveAnswer answers POST /api/v1/runs/{id}/approve.
type ApproveAnswer struct {
	Approved bool   `json:"approved"`
	ID       string `json:"id"`
	Step     string `json:"step"`
}

// ResumeAnswer answers POST /api/v1/runs/{id}/resume.
type ResumeAnswer struct {
	ID     string `json:"id"`
	Status string `json:"status"` // resuming
}

// ReloadAnswer answers a successful POST /api/v1/reload.
type ReloadAnswer struct {
	Playbooks int    `json:"playbooks"`
	Status    string `json:"status"` // ok
}

// Health answers GET /healthz.
type Health struct {
	LoadedAt  string `json:"loaded_at"` // RFC 3339, UTC
	Playbooks int    `json:"playbooks"`
	// ReloadProblems counts the diagnostics of the last reload attempt
	// when it was refused.
	ReloadProblems int    `json:"reload_problems,omitempty"`
	RunsExecuting  int    `json:"runs_executing"`
	Status         string `json:"status"` // ok
}

// Drain is the answer of GET and POST /api/v1/drain: how far this
// server's drain is.
type Drain struct {
	Draining bool       `json:"draining"`
	Since    *time.Time `json:"since,omitempty"`
	Grace    string     `json:"grace,omitempty"`
	By       string     `json:"by,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	// Executing is how many runs still execute on this server.
	Executing int `json:"executing"`
	// LetGo counts the runs it let go without executing them (parked and
	// queued ones), HandedOver those of them the other replicas took
	// over at once (the others wait in the store for this server's next
	// start), Suspended the runs suspended when the grace ended.
	LetGo      int `json:"let_go"`
	HandedOver int `json:"handed_over"`
	Suspended  int `json:"suspended"`
	// Empty: nothing executes here any more; the process may be stopped.
	Empty bool `json:"empty"`
}

// DrainRequest is the body of POST /api/v1/drain (optional).
type DrainRequest struct {
	Grace  string `json:"grace,omitempty"` // a duration: 30s, 10m
	Reason string `json:"reason,omitempty"`
}

// Ready is the answer of GET /readyz: 200 "ok" while the server takes
// requests, 503 "draining" once it is shutting down.
type Ready struct {
	Status string `json:"status"` // ok, draining
}
