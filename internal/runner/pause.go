package runner

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
)

// Run pauses (runbook pause). The host keeps a copy of the store's run
// pauses and sets it in its engine at each change (Engine.SetPauses),
// which matches it before each main step starts: a run of a paused
// playbook finishes the steps it executes, starts no other, and parks
// (state.Run.Paused), giving its slot back. The copy is read at Recover,
// after every pause made or lifted through this host and, on a store
// shared by replicas, at each NoticePause (the store sends it whoever
// wrote the pause) and each time the host listens again after a broken
// notice connection. When a pause is lifted, the runs it held here are
// woken at once, wherever the resume was asked: each replica wakes the
// runs it holds. An embedded host keeps the copy (its API lists it) but
// holds no run for it: a runbook run process is not held by a pause.

// pauses is a host's copy of the run pauses.
type pauses struct {
	mu    sync.RWMutex
	rules []state.RunPause
	// kick asks the goroutine that reads them on notices (pauseNotice)
	// for a read; once starts it.
	kick chan struct{}
	once sync.Once
	// read serializes ReadPauses: a read that began later is set later.
	read sync.Mutex
}

// held returns why a run of playbook name with labels is paused ("": it
// is not).
func (p *pauses) held(name string, labels map[string]string) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := range p.rules {
		if p.rules[i].Selects(name, labels) {
			return p.rules[i].Why()
		}
	}
	return ""
}

// set replaces the copy with rules, and sets them in eng (nil: none)
// under the same lock, so that what the host reads of the copy (held) is
// never older than what the engine matched; it reports whether a pause of
// the copy is not among them (lifted).
func (p *pauses) set(rules []state.RunPause, eng *engine.Engine) (lifted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, old := range p.rules {
		if !slices.ContainsFunc(rules, func(n state.RunPause) bool { return n.ID == old.ID }) {
			lifted = true
		}
	}
	p.rules = rules
	if eng != nil {
		eng.SetPauses(rules)
	}
	return lifted
}

// list returns the copy.
func (p *pauses) list() []state.RunPause {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.rules)
}

// ReadPauses reads the run pauses from the store into the host's copy and,
// when one was lifted, wakes the runs parked here that no pause holds any
// more.
func (r *Host) ReadPauses(ctx context.Context) error {
	r.pauses.read.Lock()
	defer r.pauses.read.Unlock()
	var rules []state.RunPause
	err := r.eng.RetryStore(ctx, "", func() (err error) {
		rules, err = r.store.RunPauses(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("read run pauses: %w", err)
	}
	eng := r.eng
	if r.o.Embedded {
		eng = nil // a runbook run process is not held by a pause
	}
	if r.pauses.set(rules, eng) {
		r.wakeUnpaused()
	}
	return nil
}

// PauseRuns records pause p and holds the runs it selects here at their
// next step; the other replicas are told by the store.
func (r *Host) PauseRuns(ctx context.Context, p state.RunPause) error {
	if err := r.store.PauseRuns(ctx, p); err != nil {
		return err
	}
	r.log.Warn("runs paused: no step of their playbooks starts until the pause is lifted", "pause", p.ID, "selector", p.Selector(), "by", p.By, "reason", p.Reason)
	return r.ReadPauses(ctx)
}

// ResumeRuns lifts pause id and wakes the runs it held here; the other
// replicas wake theirs when the store tells them.
func (r *Host) ResumeRuns(ctx context.Context, id string) (*state.RunPause, error) {
	p, err := r.store.ResumeRuns(ctx, id)
	if err != nil {
		return nil, err
	}
	r.log.Warn("runs resumed: the pause is lifted", "pause", p.ID, "selector", p.Selector())
	return p, r.ReadPauses(ctx)
}

// Pauses returns the host's copy of the run pauses.
func (r *Host) Pauses() []state.RunPause { return r.pauses.list() }

// wakeUnpaused wakes the runs parked here by a pause that no pause holds
// now: they go on through the normal launch path (each queues for a slot).
func (r *Host) wakeUnpaused() {
	r.mu.Lock()
	var ids []string
	for id, a := range r.active {
		if a.parked() && a.park.paused && r.pauses.held(a.playbook, a.park.labels) == "" {
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	if len(ids) > 0 {
		r.log.Info("waking the runs a lifted pause held", "runs", len(ids))
	}
	for _, id := range ids {
		r.wakeRun(id)
	}
}

// stillPaused reports whether run (parked by a pause, its playbook pb)
// stays parked: false when the pause was lifted while it parked, which
// wakeUnpaused did not see. r.mu is held.
func (r *Host) stillPaused(run *state.Run, pb *playbook.Playbook) bool {
	return run.Paused == "" || pb == nil || r.pauses.held(pb.Name, pb.Labels) != ""
}

// pauseNotice has the run pauses read again, in the background: one was
// made or lifted through another replica (or the CLI on the store), or
// notices were missed. One goroutine reads them, once per burst of
// notices, trying an unavailable store again until it answers; the
// notice loop goes on meanwhile (an approval's or a cancel's notice does
// not wait behind a store that is restarting).
func (r *Host) pauseNotice(ctx context.Context) {
	r.pauses.once.Do(func() {
		r.pauses.kick = make(chan struct{}, 1)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-r.pauses.kick:
				}
				if err := r.ReadPauses(ctx); err != nil && ctx.Err() == nil {
					r.log.Warn("cannot read the run pauses; they are read again at the next notice", "err", err)
				}
			}
		}()
	})
	select {
	case r.pauses.kick <- struct{}{}:
	default: // a read is due already
	}
}
