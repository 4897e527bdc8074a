package runner

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// A run cancelled by another replica as it parks here. Another replica
// records the cancellation in the store (it could not wake the run) and
// its notice tells this one; both can land after the engine recorded the
// run waiting and before the host counts it parked. Either way the run
// ends cancelled here: its finally step runs and the host lets it go.
// Before, a cancellation recorded before the host read the run back left
// it 'cancelled' with no finally step run (and its key held), and a
// notice heard before the park was dropped, leaving it parked for good.
func TestARunCancelledElsewhereAsItParksEndsCancelledHere(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notice bool // the cancel's notice is heard too, before the park
	}{
		{"the record cancelled before the host reads it back", false},
		{"the notice heard between the read and the park", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := &cancelAsItParks{}
			h, bs := boltHost(t, 0, func(bs *bolt.Store) state.Store { store.Store = bs; return store })
			pb := gatePlaybook(t)
			cancel := func(id string) { cancelledElsewhere(t, bs, id) }
			if tc.notice {
				store.arm(nil, func(id string) {
					cancel(id)
					h.cancelNotice(ctx, id)
				})
			} else {
				store.arm(cancel, nil)
			}

			run, err := h.StartRun(ctx, pb, engine.StartRequest{})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				recs, err := bs.Steps(ctx, run.ID)
				if err != nil {
					return false
				}
				for _, rec := range recs {
					if rec.ID == "bye" && rec.Status.Done() {
						return true
					}
				}
				return false
			}, 5*time.Second, 5*time.Millisecond, "the finally step never ran")
			waitRun(t, bs, run.ID, state.RunCancelled)
			recs, err := bs.Steps(ctx, run.ID)
			require.NoError(t, err)
			for _, rec := range recs {
				switch rec.ID {
				case "gate":
					assert.Equal(t, state.StepCancelled, rec.Status)
				case "bye":
					assert.Equal(t, "cancelled", rec.Outputs["status"])
				}
			}
			require.Eventually(t, func() bool { return !h.Holds(run.ID) }, 5*time.Second, time.Millisecond, "ended: no longer held")
			store.mu.Lock()
			defer store.mu.Unlock()
			assert.True(t, store.before == nil && store.after == nil, "the cancellation was made as the run parked")
		})
	}
}

// gatePlaybook waits on an approval; its finally step records the run's
// status.
func gatePlaybook(t *testing.T) *playbook.Playbook {
	t.Helper()
	pb, err := playbook.Parse("gate.yaml", []byte(`version: 1
name: gate
steps:
  - {id: gate, uses: approval, with: {message: go?}}
finally:
  - {id: bye, uses: set, with: {status: "${{ run.status }}"}}
`), playbook.LoadOptions{})
	require.NoError(t, err)
	return pb
}

// boltHost opens a bbolt store in t's directory and a host on it
// (through wrap, when set) with maxRunning execution slots (0: the
// default); the host is suspended and the store closed when t ends.
func boltHost(t *testing.T, maxRunning int, wrap func(*bolt.Store) state.Store) (*Host, *bolt.Store) {
	t.Helper()
	bs, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{NoSync: true})
	require.NoError(t, err)
	var store state.Store = bs
	if wrap != nil {
		store = wrap(bs)
	}
	h := New(Options{MaxRunning: maxRunning, Engine: engine.Options{Store: store, Environ: []string{}}})
	t.Cleanup(func() {
		h.Suspend(5 * time.Second)
		_ = bs.Close()
	})
	return h, bs
}

// cancelledElsewhere records run id cancelled in store, as another
// replica does with a run it cannot wake.
func cancelledElsewhere(t *testing.T, store state.Store, id string) {
	t.Helper()
	ctx := context.Background()
	run, err := store.GetRun(ctx, id)
	require.NoError(t, err)
	run.Status, run.EndedAt = state.RunCancelled, time.Now()
	run.Error = &state.ErrorRecord{Code: string(fault.Cancelled), Message: "cancelled by bob"}
	require.NoError(t, store.SaveRun(ctx, run, state.Event{Type: "run.cancelled", Message: "run cancelled by bob"}))
}

// cancelAsItParks is a store that, the first time a run is read back
// waiting, calls before ahead of the read (its answer then is what
// before left) or after once it is read, as the host is about to park it.
type cancelAsItParks struct {
	state.Store
	mu            sync.Mutex
	before, after func(id string)
}

func (s *cancelAsItParks) arm(before, after func(string)) {
	s.mu.Lock()
	s.before, s.after = before, after
	s.mu.Unlock()
}

func (s *cancelAsItParks) GetRun(ctx context.Context, id string) (*state.Run, error) {
	run, err := s.Store.GetRun(ctx, id)
	if err != nil || run.Status != state.RunWaiting {
		return run, err
	}
	s.mu.Lock()
	before, after := s.before, s.after
	s.before, s.after = nil, nil
	s.mu.Unlock()
	if before != nil {
		before(id)
		run, err = s.Store.GetRun(ctx, id)
	}
	if after != nil {
		after(id)
	}
	return run, err
}

// A cancel's notice heard as the run parks: the host counts the run not
// parked yet when the notice arrives, and parked once the notice has read
// the run (recorded cancelled by another replica). The run still ends
// cancelled here: its finally step runs. Before, the wake the notice
// asked for found the run parked and recorded cancelled, took it for
// ended and let it go: no finally step, its key held.
func TestACancelHeardAsTheRunParksEndsItCancelledHere(t *testing.T) {
	ctx := context.Background()
	store := &parksDuringTheNotice{entered: make(chan struct{})}
	h, bs := boltHost(t, 0, func(bs *bolt.Store) state.Store { store.Store = bs; return store })
	store.h = h
	pb := gatePlaybook(t)
	store.cancel = func(id string) { cancelledElsewhere(t, bs, id) }
	store.armed.Store(true)

	run, err := h.StartRun(ctx, pb, engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		recs, err := bs.Steps(ctx, run.ID)
		return err == nil && slices.ContainsFunc(recs, func(rec *state.StepRecord) bool { return rec.ID == "bye" && rec.Status.Done() })
	}, 5*time.Second, 5*time.Millisecond, "the finally step never ran")
	waitRun(t, bs, run.ID, state.RunCancelled)
	recs, err := bs.Steps(ctx, run.ID)
	require.NoError(t, err)
	for _, rec := range recs {
		if rec.ID == "bye" {
			assert.Equal(t, "cancelled", rec.Outputs["status"])
		}
	}
	require.Eventually(t, func() bool { return !h.Holds(run.ID) }, 5*time.Second, time.Millisecond, "ended: no longer held")
	assert.True(t, store.parkedDuringTheNotice.Load(), "the run parked while the notice read it")
}

// parksDuringTheNotice is a store whose first read of a run waiting (the
// host's read of it after the engine parked it) records the run cancelled
// by another replica and has the host hear the cancel's notice, going on
// once the notice reads the run; the notice's read answers once the host
// counts the run parked.
type parksDuringTheNotice struct {
	state.Store
	h                     *Host
	cancel                func(id string)
	armed, noticing       atomic.Bool
	entered               chan struct{}
	parkedDuringTheNotice atomic.Bool
}

func (s *parksDuringTheNotice) GetRun(ctx context.Context, id string) (*state.Run, error) {
	run, err := s.Store.GetRun(ctx, id)
	switch {
	case err != nil:
	case run.Status == state.RunWaiting && s.armed.CompareAndSwap(true, false):
		s.cancel(id)
		s.noticing.Store(true)
		go s.h.cancelNotice(context.Background(), id)
		select {
		case <-s.entered: // the notice counted the run not parked, and reads it
		case <-time.After(5 * time.Second):
		}
	case run.Status == state.RunCancelled && s.noticing.CompareAndSwap(true, false):
		close(s.entered)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if s.h.isParked(id) {
				s.parkedDuringTheNotice.Store(true)
				break
			}
		}
	}
	return run, err
}

// A parked run recorded cancelled by another replica while every slot
// here is taken, heard through the cancel's notice or found when
// something else wakes it (its timer, an answer): it queues for a slot to
// end cancelled, and when it gets one its finally step runs. Before, the
// slot's check for a run cancelled while queued took it for a run
// cancelled before it started and let it go: no finally step.
func TestAParkedRunCancelledElsewhereWhileTheSlotsAreTakenEndsCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		heard func(h *Host, id string)
	}{
		{"the cancel's notice", func(h *Host, id string) { h.cancelNotice(context.Background(), id) }},
		{"a wake", func(h *Host, id string) { h.wakeRun(id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, bs, gate, blocker := parkedWithTheSlotTaken(t)
			cancelledElsewhere(t, bs, gate)
			tc.heard(h, gate)
			assert.Equal(t, 1, h.Queued(), "the cancelled run waits for the slot")

			waitRun(t, bs, blocker, state.RunSucceeded)
			endedCancelledWithItsFinallyStep(t, h, bs, gate)
		})
	}
}

// parkedWithTheSlotTaken starts, on a host with one execution slot, the
// gate playbook's run (gate), parked on its approval, and then a run that
// sleeps 500 ms (blocker), executing in the slot.
func parkedWithTheSlotTaken(t *testing.T) (h *Host, bs *bolt.Store, gate, blocker string) {
	t.Helper()
	ctx := context.Background()
	h, bs = boltHost(t, 1, nil)
	g, err := h.StartRun(ctx, gatePlaybook(t), engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.isParked(g.ID) }, 5*time.Second, time.Millisecond, "never parked")
	busy, err := playbook.Parse("busy.yaml", []byte(`version: 1
name: busy
steps:
  - {id: nap, uses: sleep, with: {duration: 500ms}}
`), playbook.LoadOptions{})
	require.NoError(t, err)
	b, err := h.StartRun(ctx, busy, engine.StartRequest{})
	require.NoError(t, err)
	waitRun(t, bs, b.ID, state.RunRunning)
	return h, bs, g.ID, b.ID
}

// endedCancelledWithItsFinallyStep waits for the gate playbook's run id
// to run its finally step, end cancelled and be let go by h.
func endedCancelledWithItsFinallyStep(t *testing.T, h *Host, bs *bolt.Store, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		recs, err := bs.Steps(context.Background(), id)
		return err == nil && slices.ContainsFunc(recs, func(rec *state.StepRecord) bool { return rec.ID == "bye" && rec.Status.Done() })
	}, 5*time.Second, 5*time.Millisecond, "the finally step never ran")
	waitRun(t, bs, id, state.RunCancelled)
	require.Eventually(t, func() bool { return !h.Holds(id) }, 5*time.Second, time.Millisecond, "ended: no longer held")
}

// A run that started, parked and was woken waits for a slot again; a
// schedule's overlap: replace cancelling it there (Host.Cancel) ends it as
// a cancelled run, its finally steps run, when it gets the slot. Before,
// it was recorded cancelled "before it started" and let go, its finally
// step never run.
func TestAStartedRunCancelledWhileItWaitsForASlotRunsItsFinallySteps(t *testing.T) {
	h, bs, gate, blocker := parkedWithTheSlotTaken(t)
	require.True(t, h.wakeRun(gate)) // no answer: it would park again
	require.Equal(t, 1, h.Queued(), "woken, it waits for the slot")

	h.Cancel(gate)
	assert.Equal(t, 1, h.Queued(), "it still waits for the slot, to end cancelled")
	waitRun(t, bs, blocker, state.RunSucceeded)
	endedCancelledWithItsFinallyStep(t, h, bs, gate)
	events, err := bs.Events(context.Background(), gate, 0, 0)
	require.NoError(t, err)
	for _, ev := range events {
		assert.NotContains(t, ev.Message, "before it started", "it had started")
	}
}

// A cancel answered through the host (the API's CancelRun) for a run that
// waits for a slot is on record when the server stops before the slot
// frees: the run does not come back uncancelled at the next start. Before,
// it was noted in memory only (engine.CancelNext) and dropped with the
// queue.
func TestACancelAnsweredWhileTheRunWaitsForASlotOutlivesAStop(t *testing.T) {
	h, bs, gate, _ := parkedWithTheSlotTaken(t)
	require.True(t, h.CancelRun(gate, &fault.Error{Code: fault.Cancelled, Message: "cancelled by bob"}), "answered: cancelling")
	require.Equal(t, 1, h.Queued(), "it waits for the slot to end cancelled")

	h.Suspend(5 * time.Second)
	run, err := bs.GetRun(context.Background(), gate)
	require.NoError(t, err)
	assert.Equal(t, state.RunCancelled, run.Status, "the cancel answered is on record")
	require.NotNil(t, run.Error)
	assert.Equal(t, "run cancelled: cancelled by bob", run.Error.Message)
}

// A parked run whose snapshot no longer loads cannot be executed to end
// cancelled: a cancel answered for it (the API's CancelRun) is recorded
// at once. Before, it waited in memory for an execution that could not
// come, until the server stopped.
func TestACancelAnsweredForAParkedRunThatCannotResumeIsRecorded(t *testing.T) {
	ctx := context.Background()
	h, bs := boltHost(t, 0, nil)
	gate, err := h.StartRun(ctx, gatePlaybook(t), engine.StartRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.isParked(gate.ID) }, 5*time.Second, time.Millisecond, "never parked")
	run, err := bs.GetRun(ctx, gate.ID)
	require.NoError(t, err)
	run.Hash, run.Snapshot = "", []byte("steps: [") // no longer loads
	require.NoError(t, bs.SaveRun(ctx, run))

	require.True(t, h.CancelRun(gate.ID, &fault.Error{Code: fault.Cancelled, Message: "cancelled by bob"}), "answered: cancelling")
	waitRun(t, bs, gate.ID, state.RunCancelled)
	got, err := bs.GetRun(ctx, gate.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Error)
	assert.Equal(t, "run cancelled: cancelled by bob", got.Error.Message)
	assert.False(t, h.Holds(gate.ID))
}
