package engine

import (
	"errors"

	"github.com/runbook/runbook/internal/playbook"
)

// Pauses say whether the runs of a playbook are paused (Options.Host.Pauses):
// an operator holds them for a change freeze (runbook pause). A paused
// run starts no step: before each attempt of a main step starts (a
// step's first, or the next after a retry's delay) the engine asks, and
// when the playbook is paused the step does not start — it stays as
// recorded, pending or between two attempts — and the run parks once the
// steps executing have ended, recorded waiting with why (state.Run.Paused)
// and keeping its concurrency key, as a run parked on an approval does.
// Its host wakes it when the pause is lifted; it goes on from the step
// that did not start. What is not a start is not held: an attempt that
// continues (an approval reading its answer, a task wait polling again),
// a sub-playbook run (one step of its parent, which finishes as any step
// executing does), and the on_failure and finally steps of a run ending.
type Pauses interface {
	// Paused returns why the runs of pb are paused ("": they are not).
	Paused(pb *playbook.Playbook) string
}

// errPaused is the attempt of a step that did not start: its playbook is
// paused (Pauses).
var errPaused = errors.New("playbook paused")

// paused returns errPaused when the run's playbook is paused, noting why
// for its park. A sub-playbook run is not held: see Pauses.
func (rs *runState) paused() error {
	p := rs.e.o.Host.Pauses
	if p == nil || rs.run.ParentID != "" {
		return nil
	}
	why := p.Paused(rs.pb)
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
