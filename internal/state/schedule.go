package state

import (
	"context"
	"time"
)

// AllTriggers is the Trigger of a SchedulePause that pauses every schedule
// trigger of its playbook.
const AllTriggers = -1

// SchedulePause keeps schedule triggers of a playbook from starting runs
// until it is resumed: while it is recorded, the scheduler records each
// slot that comes as skipped with its reason. It is named by its playbook
// and trigger; a playbook may have a pause of every trigger and pauses of
// single triggers at once (each is resumed on its own).
type SchedulePause struct {
	Playbook string `json:"playbook"`
	// Trigger is the index of the paused trigger in the playbook's
	// triggers, or AllTriggers.
	Trigger int       `json:"trigger"`
	Reason  string    `json:"reason"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Covers reports whether p pauses the trigger at index of its playbook.
func (p *SchedulePause) Covers(index int) bool {
	return p.Trigger == AllTriggers || p.Trigger == index
}

// ScheduleStore keeps the schedule pauses, a part of Store; the contract
// suite is statetest.RunSchedules. A pause is shared by every process on
// the store: the scheduler reads them before each slot it fires.
type ScheduleStore interface {
	// PauseSchedule records p, replacing the pause of the same playbook
	// and trigger. A zero At is set to now.
	PauseSchedule(ctx context.Context, p SchedulePause) error
	// ResumeSchedule deletes the pause of playbook's trigger (an index, or
	// AllTriggers) and returns it; ErrNotFound when there is none.
	ResumeSchedule(ctx context.Context, playbook string, trigger int) (*SchedulePause, error)
	// SchedulePauses returns the pauses of playbook ("": of every
	// playbook), by playbook, then trigger (AllTriggers first).
	SchedulePauses(ctx context.Context, playbook string) ([]SchedulePause, error)
}
