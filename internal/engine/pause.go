package engine

import (
	"errors"
	"slices"

	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Run pauses (runbook pause): an operator holds the runs of the playbooks
// a pause selects, for a change freeze. The engine's host reads the
// pauses from the store and sets them here whenever they change
// (SetPauses; the run host: internal/runner/pause.go). A paused run starts
// no step: before each attempt of a main step starts (a step's first, or
// the next after a retry's delay) the engine matches the run's playbook
// against the pauses set, and when one selects it the step does not
// start — it stays as recorded, pending or between two attempts — and
// the run parks once the steps executing have ended, recorded waiting
// with why (state.Run.Paused) and keeping its concurrency key, as a run
// parked on an approval does. Its host wakes it when the pause is
// lifted; it goes on from the step that did not start. What is not a
// start is not held: an attempt that continues (an approval reading its
// answer, a task wait polling again), a sub-playbook run (one step of
// its parent, which finishes as any step executing does), and the
// on_failure and finally steps of a run ending.

// SetPauses replaces the run pauses in force with rules (none: no run is
// paused, as before the first call). The next step attempts to start are
// matched against them.
func (e *Engine) SetPauses(rules []state.RunPause) {
	rules = slices.Clone(rules)
	e.pauses.Store(&rules)
}

// pausedBy returns why the runs of pb are paused ("": they are not).
func (e *Engine) pausedBy(pb *playbook.Playbook) string {
	rules := e.pauses.Load()
	if rules == nil {
		return ""
	}
	for i := range *rules {
		if (*rules)[i].Selects(pb.Name, pb.Labels) {
			return (*rules)[i].Why()
		}
	}
	return ""
}

// errPaused is the attempt of a step that did not start: its playbook is
// paused (SetPauses).
var errPaused = errors.New("playbook paused")

// paused returns errPaused when the run's playbook is paused, noting why
// for its park. A sub-playbook run is not held: see above.
func (rs *runState) paused() error {
	if rs.run.ParentID != "" {
		return nil
	}
	why := rs.e.pausedBy(rs.pb)
	if why == "" {
		return nil
	}
	rs.mu.Lock()
	rs.pausedBy = why
	rs.mu.Unlock()
	return errPaused
}

// pauseNote sets the run's Paused from what held its steps and clears it
// for the next execution; it reports why ("": not paused).
func (rs *runState) pauseNote() string {
	rs.mu.Lock()
	why := rs.pausedBy
	rs.pausedBy = ""
	rs.mu.Unlock()
	rs.run.Paused = why
	return why
}
