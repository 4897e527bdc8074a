package api

import "github.com/runbook/runbook/internal/state"

// ScheduleControl is the body of POST /api/v1/playbooks/{name}/schedules/pause,
// …/resume and …/run: which schedule trigger (its index in the playbook's
// triggers; absent: every schedule trigger for a pause or resume, the only
// one for a run) and, for a pause, why (required).
type ScheduleControl struct {
	Trigger *int   `json:"trigger,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// SchedulePauseAnswer answers a pause or a resume: the pause recorded or
// lifted (its trigger is -1 for every schedule trigger of the playbook).
type SchedulePauseAnswer struct {
	Status string              `json:"status"` // "paused" or "resumed"
	Pause  state.SchedulePause `json:"pause"`
}

// BackfillRequest is the body of POST /api/v1/playbooks/{name}/schedules/backfill.
type BackfillRequest struct {
	Trigger *int   `json:"trigger,omitempty"` // absent: the playbook's only schedule trigger
	From    string `json:"from"`              // RFC 3339, inclusive
	To      string `json:"to"`                // RFC 3339, inclusive (at most now)
	DryRun  bool   `json:"dry_run,omitempty"`
	Max     int    `json:"max,omitempty"` // refuse more slots than this (0: 100)
}

// BackfillAnswer lists what a backfill did (or, dry, would do) with each
// slot of its range, oldest first.
type BackfillAnswer struct {
	Playbook string         `json:"playbook"`
	Trigger  int            `json:"trigger"`
	DryRun   bool           `json:"dry_run,omitempty"`
	Started  int            `json:"started"`
	Slots    []BackfillSlot `json:"slots"`
}

// BackfillSlot is one slot of a backfill: started (its run started now),
// would start (dry run), has run (the scheduler or an earlier backfill
// started Run), handled (the scheduler handled it without a run: Note).
type BackfillSlot struct {
	Slot    string `json:"slot"`
	Outcome string `json:"outcome"`
	Run     string `json:"run,omitempty"`
	Note    string `json:"note,omitempty"`
}
