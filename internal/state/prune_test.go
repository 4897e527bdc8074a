package state_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func TestPruneDeletesOnlyFinishedRunTreesThatEndedBeforeTheCutoff(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	old, recent := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	open := func(t *testing.T) state.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		add := func(id, parent string, st state.RunStatus, ended time.Time) {
			r := &state.Run{ID: id, Playbook: "pb", Status: st, ParentID: parent, CreatedAt: ended.Add(-time.Minute)}
			if st.Done() {
				r.EndedAt = ended
			}
			require.NoError(t, s.CreateRun(ctx, r, state.Event{Type: "run.created"}))
			require.NoError(t, s.SaveStep(ctx, &state.StepRecord{RunID: id, ID: "a", Status: state.StepSucceeded}))
		}
		add("old-ok", "", state.RunSucceeded, old)
		add("old-failed", "", state.RunFailed, old)
		add("recent-ok", "", state.RunSucceeded, recent)
		add("old-waiting", "", state.RunWaiting, old)
		add("tree", "", state.RunSucceeded, old)
		add("tree-child", "tree", state.RunSucceeded, old)
		add("parked", "", state.RunFailed, old)
		add("parked-child", "parked", state.RunWaiting, old)
		return s
	}
	ids := func(runs []*state.Run) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	left := func(t *testing.T, s state.Store) []string {
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		require.NoError(t, err)
		return ids(runs)
	}

	t.Run("every finished status by default, a tree with its children", func(t *testing.T) {
		s := open(t)
		got, err := state.Prune(ctx, s, state.PruneOptions{Before: now.Add(-30 * 24 * time.Hour)})
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"old-ok", "old-failed", "tree"}, ids(got))
		assert.ElementsMatch(t, []string{"recent-ok", "old-waiting", "parked", "parked-child"}, left(t, s))
		_, err = s.GetStep(ctx, "tree-child", "a")
		assert.True(t, errors.Is(err, state.ErrNotFound), "the child's steps went with it: %v", err)
	})
	t.Run("only the statuses asked for", func(t *testing.T) {
		s := open(t)
		got, err := state.Prune(ctx, s, state.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Status: []state.RunStatus{state.RunFailed, state.RunWaiting}})
		require.NoError(t, err)
		assert.Equal(t, []string{"old-failed"}, ids(got), "a waiting run is never pruned, even when asked for")
	})
	t.Run("a dry run deletes nothing", func(t *testing.T) {
		s := open(t)
		got, err := state.Prune(ctx, s, state.PruneOptions{Before: now, DryRun: true})
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"old-ok", "old-failed", "recent-ok", "tree"}, ids(got))
		assert.Len(t, left(t, s), 8)
	})
}

func TestPruneDeletesTheBodiesOfDeliveriesWhoseRunsAreAllGone(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	commit := func(id string, ended time.Time, runs ...string) {
		d := state.Delivery{Key: "hooks/" + id, ID: id, Body: []byte(`{"hooks":[{"hookId":"a"},{"hookId":"b"}]}`)}
		for i, rid := range runs {
			r := &state.Run{ID: rid, Playbook: "pb", Status: state.RunSucceeded, CreatedAt: ended.Add(-time.Minute), EndedAt: ended,
				Delivery: &state.DeliveryRef{ID: id, Hook: i}}
			d.Units = append(d.Units, state.DeliveryUnit{Run: r, Events: []state.Event{{Type: "run.created"}}})
		}
		_, err := s.CommitDelivery(ctx, d)
		require.NoError(t, err)
	}
	commit("old", now.Add(-40*24*time.Hour), "old-a", "old-b")
	commit("mixed", now.Add(-40*24*time.Hour), "mixed-a")
	commit("recent", now.Add(-time.Hour), "recent-a")
	// A retry made today of an old delivery's run keeps its body.
	require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "mixed-retry", Playbook: "pb", Status: state.RunSucceeded,
		CreatedAt: now.Add(-time.Hour), EndedAt: now.Add(-time.Hour), Delivery: &state.DeliveryRef{ID: "mixed", Hook: 0}}))

	_, err = state.Prune(ctx, s, state.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), DryRun: true})
	require.NoError(t, err)
	_, err = s.GetDelivery(ctx, "old")
	require.NoError(t, err, "a dry run deletes nothing")

	pruned, err := state.Prune(ctx, s, state.PruneOptions{Before: now.Add(-30 * 24 * time.Hour)})
	require.NoError(t, err)
	assert.Len(t, pruned, 3)
	_, err = s.GetDelivery(ctx, "old")
	assert.ErrorIs(t, err, state.ErrNotFound)
	for _, kept := range []string{"mixed", "recent"} {
		_, err = s.GetDelivery(ctx, kept)
		assert.NoError(t, err, kept)
	}
}
