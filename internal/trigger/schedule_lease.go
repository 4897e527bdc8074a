package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// Several schedulers on one shared store (replicas of `runbook serve`).
//
// One at a time leads: the holder of the leader lease (LeaderLease),
// taken when free or expired and renewed every third of its TTL with the
// term it was taken with, as River elects its leader. Only the leader
// fires; a replica that becomes leader loads every trigger afresh from
// its cursor, so the slots missed since the last one handled are caught
// up per the trigger's catch-up policy.
//
// Correctness does not rest on the lease: a leader that lost its lease
// without noticing (a pause longer than the TTL) may still fire. Each
// slot is therefore committed with its run in one transaction under a
// unique claim (SlotClaim; state.Store.CommitDelivery), and a slot
// skipped by the overlap policy is claimed too: whichever scheduler
// claims a slot first fires it, the others find it claimed. The cursor
// is written after the claim and only bounds the catch-up.

// LeaderLease is the name of the scheduler's leader lease.
const LeaderLease = "scheduler"

// Leader is the lease the schedulers take turns with (state.Coordinator
// implements it). Lead may answer an error that is ErrNotNow: this
// scheduler may not lead for now, whatever the lease says.
type Leader interface {
	Lead(ctx context.Context, name, holder string, term int64, ttl time.Duration) (int64, error)
	Resign(ctx context.Context, name, holder string, term int64) error
}

// ErrNotNow is what a Leader answers when this scheduler may not lead
// for now (a replica whose own lease lapsed: it is fencing itself). The
// scheduler stops leading at once, without waiting for the lease to run
// out as it does when a renewal fails, and asks again at its next renewal.
var ErrNotNow = errors.New("may not lead the scheduler for now")

// SlotClaim is the claim key of a trigger's slot (see CursorKey).
func SlotClaim(cursorKey string, slot time.Time) string {
	return "slot/" + cursorKey + "/" + slot.UTC().Format(time.RFC3339Nano)
}

// slotClaimTTL is how long a slot's claim is kept: longer than any
// catch-up reaches back.
func slotClaimTTL(e *entry) time.Duration { return catchupWindow(e.trig.Schedule) + 24*time.Hour }

// runLeased fires slots while this scheduler holds the leader lease, until
// ctx ends; then it resigns.
func (s *Scheduler) runLeased(ctx context.Context) error {
	ttl := s.opts.LeaderTTL
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	var (
		term    int64
		renewed time.Time
		stop    context.CancelFunc
		done    chan struct{}
	)
	stopLeading := func() {
		s.leading.Store(false)
		if stop != nil {
			stop()
			<-done
			stop = nil
		}
		term = 0
	}
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		got, err := s.opts.Leader.Lead(ctx, LeaderLease, s.opts.Holder, term, ttl)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrNotNow):
			if term != 0 {
				s.log.Error("scheduler lease given up", "term", term, "reason", err)
			}
			stopLeading()
		case err != nil && term != 0 && time.Since(renewed) < ttl:
			s.log.Warn("cannot renew the scheduler lease", "err", err)
		case err != nil:
			if term != 0 {
				s.log.Error("scheduler lease lost: cannot renew it", "term", term, "err", err)
			}
			stopLeading()
		case got == 0:
			if term != 0 {
				s.log.Warn("scheduler lease lost to another replica", "term", term)
			}
			stopLeading()
		default:
			if term == 0 {
				s.log.Info("this replica leads the scheduler", "term", got)
				// Every trigger is loaded again from its cursor: the
				// slots missed under the previous leader are caught up.
				s.entries = map[string]*entry{}
				s.mu.Lock()
				s.dirty = true
				s.mu.Unlock()
				stop, done = s.lead(ctx)
				s.leading.Store(true)
			}
			term, renewed = got, time.Now()
		}
		select {
		case <-ctx.Done():
			held := term
			stopLeading()
			if held != 0 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := s.opts.Leader.Resign(rctx, LeaderLease, s.opts.Holder, held); err != nil {
					s.log.Warn("cannot resign the scheduler lease; it expires by itself", "err", err)
				}
				cancel()
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Leading reports whether this scheduler holds the leader lease now
// (always false without a Leader).
func (s *Scheduler) Leading() bool { return s.leading.Load() }

// lead runs the scheduler until the returned stop is called; done is
// closed when it returned.
func (s *Scheduler) lead(ctx context.Context) (stop context.CancelFunc, done chan struct{}) {
	lctx, stop := context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); _ = s.run(lctx) }()
	return stop, done
}

// startClaimed commits the slot's claim with its run in one transaction,
// then launches the run. It returns the run's ID, or the ID of the run of
// the scheduler that claimed the slot first (dup).
func (s *Scheduler) startClaimed(ctx context.Context, e *entry, slot time.Time, req StartRequest) (runID string, dup bool, err error) {
	p, ok := s.opts.Starter.(Preparer)
	if !ok {
		return "", false, fmt.Errorf("the starter cannot prepare runs to commit with their slot")
	}
	return commitSlot(ctx, s.opts.Store, p, SlotClaim(e.key, slot), slotClaimTTL(e), req)
}

// commitSlot commits a slot's claim with the run of req in one
// transaction, then launches the run. When the slot was claimed already
// (dup), nothing is committed and runID is the claim's value: the run
// that claimed it, or a note of why it has none (claimSlot).
func commitSlot(ctx context.Context, st state.Store, p Preparer, claim string, ttl time.Duration, req StartRequest) (runID string, dup bool, err error) {
	run, evs, err := p.Prepare(ctx, req)
	if err != nil {
		return "", false, err
	}
	res, err := st.CommitDelivery(ctx, state.Delivery{
		Key: claim, TTL: ttl,
		Units: []state.DeliveryUnit{{Run: run, Events: evs}},
		Done:  func(created []string, _ [][]byte) []byte { return []byte(created[0]) },
	})
	if err != nil {
		return "", false, fmt.Errorf("commit slot claim and run: %w", err)
	}
	if res.Duplicate {
		return string(res.Value), true, nil
	}
	p.Launch(run)
	return run.ID, false, nil
}

// The values of a slot's claim that started no run (see claimSlot).
const (
	claimSkipped = "skipped" // by the overlap policy
	claimFailed  = "failed"  // its run could not start
)

// claimSlot claims a slot that starts no run (skipped, or failed before
// its run could be prepared), noting why (claimSkipped, claimFailed), and
// reports whether another scheduler had.
func (s *Scheduler) claimSlot(ctx context.Context, e *entry, slot time.Time, why string) (bool, error) {
	key := SlotClaim(e.key, slot)
	seen, err := s.opts.Store.Dedup(ctx, key, slotClaimTTL(e))
	if err != nil {
		return false, fmt.Errorf("claim slot: %w", err)
	}
	if !seen {
		if err := s.opts.Store.DedupSet(ctx, key, []byte(why)); err != nil {
			s.log.Warn("why a schedule slot started no run is not noted", "playbook", e.pb.Name, "trigger", e.index, "slot", slot, "err", err)
		}
	}
	return seen, nil
}

// claiming reports whether slots are claimed: always under a Leader, and
// whenever the Starter can prepare runs to commit with their claim, so
// that a backfill (Backfill) never starts a slot the scheduler fired.
func (s *Scheduler) claiming() bool {
	_, ok := s.opts.Starter.(Preparer)
	return ok || s.opts.Leader != nil
}

// startRun starts the slot's run: committed with its claim when claiming
// (dup: another scheduler or a backfill claimed the slot first, runID is
// its run), else through the Starter.
func (s *Scheduler) startRun(ctx context.Context, e *entry, slot time.Time, req StartRequest) (runID string, dup bool, err error) {
	if !s.claiming() {
		runID, err = s.opts.Starter.Start(ctx, req)
		return runID, false, err
	}
	runID, dup, err = s.startClaimed(ctx, e, slot, req)
	if err == nil && s.opts.Leader != nil {
		s.advance(ctx, e, slot)
	}
	return runID, dup, err
}

// claimFailed claims a slot whose run could not start and reports whether
// it is handled: another scheduler claimed it first (reported skipped), or
// the claim failed (reported failed); else the caller records the failure.
func (s *Scheduler) claimFailed(ctx context.Context, e *entry, q queued) bool {
	seen, err := s.claimSlot(ctx, e, q.slot, claimFailed)
	switch {
	case err != nil:
		s.report(e, Firing{Slot: q.slot, Outcome: Failed, Catchup: q.catchup, Err: err})
		return true
	case seen:
		s.report(e, Firing{Slot: q.slot, Outcome: Skipped, Catchup: q.catchup})
		return true
	}
	s.advance(ctx, e, q.slot)
	return false
}

// advance records slot as the trigger's last handled one, after its claim.
func (s *Scheduler) advance(ctx context.Context, e *entry, slot time.Time) {
	if slot.After(e.last) {
		e.last = slot
	}
	if err := s.putCursor(ctx, e, e.last); err != nil {
		s.log.Warn("schedule cursor not saved; the slot's claim keeps it from firing again", "playbook", e.pb.Name, "trigger", e.index, "err", err)
	}
}
