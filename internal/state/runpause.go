package state

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// RunPause holds the runs of the playbooks it selects at their next step
// boundary (runbook pause): while it is recorded, no main step of such a
// run starts, and the run parks, holding no execution slot, until the
// pause is lifted (see engine.Engine.SetPauses). It selects playbooks by name
// (Pattern, a glob as path.Match reads it: "nks-*") or by a label
// (Label, "k=v"), exactly one of them. A pause is shared by every process
// on the store; several may be recorded, each lifted on its own.
type RunPause struct {
	ID      string    `json:"id"`
	Pattern string    `json:"pattern,omitempty"`
	Label   string    `json:"label,omitempty"`
	Reason  string    `json:"reason"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Check reports what is wrong with p's selector (nil: nothing).
func (p *RunPause) Check() error {
	switch {
	case (p.Pattern == "") == (p.Label == ""):
		return fmt.Errorf("a pause selects playbooks by a name pattern or by a label (k=v), one of them")
	case p.Pattern != "":
		if err := CheckPlaybookPattern(p.Pattern); err != nil {
			return err
		}
	default:
		if k, _, ok := strings.Cut(p.Label, "="); !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("label %q: want k=v, as team=platform", p.Label)
		}
	}
	return nil
}

// Selector is p's selector as a person writes it: the pattern, or
// "label k=v".
func (p *RunPause) Selector() string {
	if p.Label != "" {
		return "label " + p.Label
	}
	return p.Pattern
}

// Selects reports whether p holds the runs of the playbook named name
// with labels.
func (p *RunPause) Selects(name string, labels map[string]string) bool {
	if p.Label != "" {
		k, v, _ := strings.Cut(p.Label, "=")
		got, ok := labels[k]
		return ok && got == v
	}
	return PlaybookMatches(p.Pattern, name)
}

// CheckPlaybookPattern reports what is wrong with a playbook name pattern
// (a glob as path.Match reads it: "nks-*"), as a pause and an agent's
// limit select playbooks.
func CheckPlaybookPattern(pattern string) error {
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return nil
}

// PlaybookMatches reports whether the playbook named name matches
// pattern (CheckPlaybookPattern); a bad pattern matches nothing.
func PlaybookMatches(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// Why is what a run p holds says of it: "paused by alice: change freeze".
func (p *RunPause) Why() string {
	return "paused by " + p.By + ": " + p.Reason
}

// RunPauseStore keeps the run pauses, a part of Store; the contract suite
// is statetest.RunRunPauses. On a store shared by replicas, recording or
// deleting a pause notifies them (NoticePause).
type RunPauseStore interface {
	// PauseRuns records p; a zero At is set to now. A pause with p's ID or
	// with p's selector recorded already is ErrExists (one pause per
	// selector: one resume lifts it).
	PauseRuns(ctx context.Context, p RunPause) error
	// ResumeRuns deletes pause id and returns it; ErrNotFound when there
	// is none.
	ResumeRuns(ctx context.Context, id string) (*RunPause, error)
	// RunPauses returns the pauses, oldest first.
	RunPauses(ctx context.Context) ([]RunPause, error)
}
