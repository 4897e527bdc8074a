package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/postgres/pgtest"
)

// lostCommit is a replica's store whose write of run target's end commits
// and then answers as if the connection had dropped, and fails every
// write of the run after it, with the lease's renewals, until cut is
// cleared: the replica cannot tell that the run ended, and its lease
// lapses before it could try again.
type lostCommit struct {
	*cutOff
	target atomic.Value // run ID
	fired  atomic.Bool
}

func (l *lostCommit) lost(r *state.Run, write func() error) error {
	if id, _ := l.target.Load().(string); id == "" || r.ID != id {
		return write()
	}
	if l.cut.Load() {
		return fmt.Errorf("connection lost (test): %w", state.ErrUnavailable)
	}
	if !r.Status.Done() || l.fired.Load() {
		return write()
	}
	if err := write(); err != nil {
		return err
	}
	l.fired.Store(true)
	l.cut.Store(true)
	return fmt.Errorf("connection lost as the commit was answered (test): %w", state.ErrUnavailable)
}

func (l *lostCommit) SaveRun(ctx context.Context, r *state.Run, events ...state.Event) error {
	return l.lost(r, func() error { return l.cutOff.SaveRun(ctx, r, events...) })
}

func (l *lostCommit) SaveRunSteps(ctx context.Context, r *state.Run, recs []*state.StepRecord, events ...state.Event) error {
	return l.lost(r, func() error { return l.cutOff.SaveRunSteps(ctx, r, recs, events...) })
}

// A run whose end was recorded, though its replica lost the answer and its
// lease lapsed while it tried the write again, releases its concurrency
// key: the run queued on the key goes on, not a key poll (30 s) or a
// restart later. (The fault campaign's part (c) found runs queued behind
// a holder that had succeeded.)
func TestARunThatEndedReleasesItsKeyAfterItsReplicaLostTheCommit(t *testing.T) {
	dsn := pgtest.DB(t)
	dir, files := t.TempDir(), t.TempDir()
	gate := filepath.Join(files, "gate")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keyed.yaml"), []byte(fmt.Sprintf(`version: 1
name: keyed
concurrency: {key: one-at-a-time, on_busy: queue}
steps:
  - id: wait
    uses: shell
    with: {command: "touch %[1]s.waiting; while [ ! -e %[1]s ]; do sleep 0.02; done"}
`, gate)), 0o600))
	st := &lostCommit{cutOff: &cutOff{Store: openPG(t, dsn)}}
	a := pgReplica(t, dir, "lost-a/1", st)

	r := a.api("POST", "/api/v1/playbooks/keyed/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	first := r.json(t)["id"].(string)
	waitFor(t, "the first run holds the key and waits for the gate", func() bool { _, err := os.Stat(gate + ".waiting"); return err == nil })
	r = a.api("POST", "/api/v1/playbooks/keyed/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	second := r.json(t)["id"].(string)
	a.waitStatus(second, state.RunWaiting, state.RunPending)

	st.target.Store(first)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	waitFor(t, "the first run's end commits, unanswered", st.cut.Load)
	time.Sleep(fenceLease) // past the lapse of the replica's lease
	require.Equal(t, state.RunSucceeded, ownerOf(t, st.Store, first).Status, "the first run's end is recorded")
	st.cut.Store(false)

	deadline := time.Now().Add(10 * time.Second)
	for ownerOf(t, st.Store, second).Status != state.RunSucceeded {
		if time.Now().After(deadline) {
			locks, err := st.Store.Locks(context.Background())
			require.NoError(t, err)
			t.Fatalf("the run queued on the key is %s 10 s after the replica came back; locks: %+v", ownerOf(t, st.Store, second).Status, locks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
