package bolt_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

func TestRunEventsAreNumberedFromOne(t *testing.T) {
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		save func(t *testing.T, s *bolt.Store)
	}{
		{"events given to CreateRun", func(t *testing.T, s *bolt.Store) {
			require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r", Playbook: "pb", CreatedAt: created},
				state.Event{Type: "e1"}, state.Event{Type: "e2"}, state.Event{Type: "e3"}))
		}},
		{"events given to CommitDelivery", func(t *testing.T, s *bolt.Store) {
			_, err := s.CommitDelivery(ctx, state.Delivery{Key: "d", TTL: time.Hour, Units: []state.DeliveryUnit{{
				Run:    &state.Run{ID: "r", Playbook: "pb", CreatedAt: created},
				Events: []state.Event{{Type: "e1"}, {Type: "e2"}, {Type: "e3"}},
			}}})
			require.NoError(t, err)
		}},
		{"events appended by SaveRun keeping the stored CreatedAt", func(t *testing.T, s *bolt.Store) {
			require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r", Playbook: "pb", CreatedAt: created}, state.Event{Type: "e1"}))
			require.NoError(t, s.SaveRun(ctx, &state.Run{ID: "r", Playbook: "pb", Status: state.RunRunning}, state.Event{Type: "e2"}))
			require.NoError(t, s.SaveRun(ctx, &state.Run{ID: "r", Playbook: "pb", Status: state.RunSucceeded}, state.Event{Type: "e3"}))
		}},
		{"events appended by SaveRun with a CreatedAt", func(t *testing.T, s *bolt.Store) {
			require.NoError(t, s.CreateRun(ctx, &state.Run{ID: "r", Playbook: "pb", CreatedAt: created}, state.Event{Type: "e1"}))
			require.NoError(t, s.SaveRun(ctx, &state.Run{ID: "r", Playbook: "pb", CreatedAt: created, Status: state.RunRunning}, state.Event{Type: "e2"}, state.Event{Type: "e3"}))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, path := openTemp(t, bolt.Options{NoSync: true})
			c.save(t, s)
			require.NoError(t, s.Close())

			s, err := bolt.Open(path, bolt.Options{ReadOnly: true})
			require.NoError(t, err)
			defer s.Close()
			evs, err := s.Events(ctx, "r", 0, 0)
			require.NoError(t, err)
			var got []string
			for i, ev := range evs {
				got = append(got, ev.Type)
				assert.Equal(t, uint64(i+1), ev.Seq, "event %s", ev.Type)
			}
			assert.Equal(t, []string{"e1", "e2", "e3"}, got)
			r, err := s.GetRun(ctx, "r")
			require.NoError(t, err)
			assert.True(t, created.Equal(r.CreatedAt), "CreatedAt %v kept", r.CreatedAt)
			runs, err := s.ListRuns(ctx, state.RunFilter{})
			require.NoError(t, err)
			assert.Len(t, runs, 1)
		})
	}
}

func TestSavingStepsOfAMissingRunNamesThem(t *testing.T) {
	cases := []struct {
		name string
		recs []*state.StepRecord
		msg  string
	}{
		{"one step is named with its run", []*state.StepRecord{{RunID: "gone", ID: "a"}}, "save step gone/a: "},
		{"several steps are counted", []*state.StepRecord{{RunID: "gone", ID: "a"}, {RunID: "gone", ID: "b"}}, "save 2 steps of run gone: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := openTemp(t, bolt.Options{NoSync: true})
			err := s.SaveSteps(ctx, c.recs, state.Event{Type: "step.started"})
			require.ErrorIs(t, err, state.ErrNotFound)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}
