package api

import "github.com/runbook/runbook/internal/state"

// PauseRequest is the body of POST /api/v1/pauses: the playbooks whose
// runs to pause, by a name pattern (a glob: nks-*) or by a label (k=v),
// one of them, and why (required).
type PauseRequest struct {
	Pattern string `json:"pattern,omitempty"`
	Label   string `json:"label,omitempty"`
	Reason  string `json:"reason"`
}

// Pause is a run pause as the API shows it: the record, and the loaded
// playbooks it selects now.
type Pause struct {
	state.RunPause
	Playbooks []string `json:"playbooks"`
}

// PauseList answers GET /api/v1/pauses, oldest first.
type PauseList struct {
	Pauses []Pause `json:"pauses"`
}

// PauseAnswer answers a pause (201) or a resume (200): the pause recorded
// or lifted.
type PauseAnswer struct {
	Status string `json:"status"` // "paused" or "resumed"
	Pause  Pause  `json:"pause"`
}
