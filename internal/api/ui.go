package api

import (
	"time"

	"github.com/runbook/runbook/internal/state"
)

// The answers of the endpoints the web UI added (docs/api.md): the
// definition of a playbook or of a run's snapshot, recent webhook
// deliveries and the schedules.

// Definition answers GET /api/v1/playbooks/{name}/definition (the loaded
// playbook, with its source) and GET /api/v1/runs/{id}/definition (the
// snapshot the run executes, without its source, with the API calls of
// the steps that ran).
type Definition struct {
	Playbook    string      `json:"playbook"`
	Description string      `json:"description,omitempty"`
	File        string      `json:"file,omitempty"`
	Hash        string      `json:"hash"`
	Source      string      `json:"source,omitempty"`
	Inputs      []InputSpec `json:"inputs"`
	Lists       []StepList  `json:"lists"`
}

// InputSpec is an input with every constraint the start of a run checks.
type InputSpec struct {
	Input
	Pattern string   `json:"pattern,omitempty"`
	Min     *float64 `json:"min,omitempty"` // numbers: value; strings and lists: length
	Max     *float64 `json:"max,omitempty"`
}

// StepList is one list of steps: steps, on_failure or finally.
type StepList struct {
	Name  string     `json:"name"`
	Steps []StepSpec `json:"steps"`
}

// StepSpec is a step as written, and for a run the calls it made.
type StepSpec struct {
	ID   string `json:"id"`
	Uses string `json:"uses"`
	Name string `json:"name,omitempty"`
	// Needs are the steps it waits for as written; null means every step
	// written before it (the order of writing).
	Needs           []string `json:"needs"`
	If              string   `json:"if,omitempty"`
	ForEach         bool     `json:"for_each,omitempty"`
	RetryAttempts   int      `json:"retry_attempts,omitempty"`
	Timeout         string   `json:"timeout,omitempty"`
	ContinueOnError bool     `json:"continue_on_error,omitempty"`
	Mutating        bool     `json:"mutating,omitempty"`
	// With and Calls are shown for the steps of a run that started: the
	// params as resolved from the run's inputs and the recorded outputs of
	// earlier steps, and the API calls they make. Secrets are ***; a value
	// known only while the step ran (for_each items, env) is described.
	With  []Param  `json:"with,omitempty"`
	Calls []Call   `json:"calls,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Param is one resolved param of a step.
type Param struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
	// Known is false when the value is only known while the step runs;
	// Value then says where it comes from.
	Known bool `json:"known"`
}

// Call is one API call a step makes.
type Call struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Body   any    `json:"body,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Delivery is one webhook request the server answered.
type Delivery struct {
	At    time.Time `json:"at"`
	Route string    `json:"route"`
	// Status is the HTTP status of the answer; Outcome is accepted,
	// duplicate or refused.
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
	// ID is the delivery's hooksId (or webhook-id), Event its event, Hooks
	// the number of hooks it carried, when the body had them.
	ID    string `json:"id,omitempty"`
	Event string `json:"event,omitempty"`
	Hooks int    `json:"hooks,omitempty"`
	// Runs are the runs the answer named (the first 100; RunsTotal counts
	// them all when there were more).
	Runs      []string `json:"runs,omitempty"`
	RunsTotal int      `json:"runs_total,omitempty"`
	// Error and Code are the answer's error, for a refused delivery.
	Error      string  `json:"error,omitempty"`
	Code       string  `json:"code,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// DeliveryList answers GET /api/v1/deliveries, newest first.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
	// Since is when this server started recording; Capacity how many
	// deliveries it keeps.
	Since    time.Time `json:"since"`
	Capacity int       `json:"capacity"`
}

// Schedule is one schedule trigger of a loaded playbook.
type Schedule struct {
	Playbook string `json:"playbook"`
	Trigger  int    `json:"trigger"` // index in the playbook's triggers
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	Overlap  string `json:"overlap,omitempty"`
	Catchup  string `json:"catchup,omitempty"`
	Jitter   string `json:"jitter,omitempty"`
	// Last is the last slot the scheduler handled (RFC 3339), empty when it
	// never saw the trigger.
	Last string `json:"last,omitempty"`
	// Next are the next fire times, in the schedule's zone.
	Next []string `json:"next"`
	// Recent are the latest slots up to now, newest first, each with the
	// run it started; Missed counts those that should have had one: not
	// fired, or handled without a run after the first run the schedule
	// started (a slot before it may predate the schedule).
	Recent []Slot `json:"recent"`
	Missed int    `json:"missed"`
	// Paused is the pause that holds the trigger, when one does.
	Paused *state.SchedulePause `json:"paused,omitempty"`
}

// Slot is one past fire time of a schedule.
type Slot struct {
	Slot   string          `json:"slot"`
	Run    string          `json:"run,omitempty"`
	Status state.RunStatus `json:"status,omitempty"`
	// Note says why a slot has no run.
	Note string `json:"note,omitempty"`
	// Paused says who paused the trigger and why, for a slot a pause
	// kept from firing.
	Paused string `json:"paused,omitempty"`
}

// ScheduleList answers GET /api/v1/schedules.
type ScheduleList struct {
	// Enabled is false when this server does not fire schedules.
	Enabled   bool       `json:"enabled"`
	Schedules []Schedule `json:"schedules"`
}
