package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

func testRuns(t *testing.T, open opener) {
	t.Run("a created run reads back with every field", func(t *testing.T) {
		s, _ := open(t)
		r := &state.Run{
			ID: "r1", Playbook: "upgrade", File: "/pb/upgrade.yaml",
			Snapshot: []byte("version: 1\nname: upgrade\n"), Hash: "abc",
			Inputs:   map[string]any{"cluster": "c1", "count": 3.0, "tags": []any{"a", "b"}},
			Trigger:  map[string]any{"kind": "schedule"},
			Status:   state.RunRunning,
			Error:    &state.ErrorRecord{Code: "internal", Message: "boom", Data: map[string]any{"k": "v"}},
			Outputs:  map[string]any{"version": "v1.2.3"},
			ParentID: "p", ParentStep: "sub", ConcurrencyKey: "nks/c1", Owner: "host:1",
			CreatedAt: at(0), StartedAt: at(time.Second), EndedAt: at(2 * time.Second), Deadline: at(time.Hour),
		}
		create(t, s, r)
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got, r)
	})

	t.Run("creating a taken ID fails with ErrExists and keeps the first run", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "first", at(0)))
		errIs(t, s.CreateRun(ctx, newRun("r1", "second", at(time.Second))), state.ErrExists)
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.Playbook, "first")
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runIDs(runs), []string{"r1"})
	})

	t.Run("a failed create writes none of its events", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)), state.Event{Type: "run.created", Time: at(0)})
		errIs(t, s.CreateRun(ctx, newRun("r1", "pb", at(0)), state.Event{Type: "run.created", Time: at(1)}), state.ErrExists)
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{1})
	})

	t.Run("an unknown run is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		_, err := s.GetRun(ctx, "nope")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("saving a run replaces it and appends its events", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r, state.Event{Type: "run.created", Time: at(0)})
		r.Status = state.RunSucceeded
		r.EndedAt = at(time.Minute)
		r.Outputs = map[string]any{"x": "y"}
		ok(t, s.SaveRun(ctx, r, state.Event{Type: "run.succeeded", Time: at(time.Minute)}))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got, r)
		evs, err := s.Events(ctx, "r1", 0, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{1, 2})
		same(t, evs[1].Type, "run.succeeded")
	})

	t.Run("saving a run with another creation time lists it once, at the new time", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(0)))
		create(t, s, newRun("r2", "pb", at(time.Minute)))
		ok(t, s.SaveRun(ctx, newRun("r1", "pb", at(2*time.Minute))))
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runIDs(runs), []string{"r1", "r2"})
		same(t, runs[0].CreatedAt, at(2*time.Minute))
	})

	t.Run("saving a run without a creation time keeps the stored one", func(t *testing.T) {
		s, _ := open(t)
		create(t, s, newRun("r1", "pb", at(time.Minute)))
		r := newRun("r1", "pb", time.Time{})
		r.Status = state.RunRunning
		ok(t, s.SaveRun(ctx, r))
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		same(t, got.CreatedAt, at(time.Minute))
		same(t, got.Status, state.RunRunning)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runIDs(runs), []string{"r1"})
	})

	t.Run("events saved with a run keep their fields past nine", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		create(t, s, r, state.Event{Type: "run.created", Time: at(0)})
		var batch []state.Event
		for i := range 11 {
			batch = append(batch, state.Event{Seq: 99, Type: "log", Message: fmt.Sprint("m", i), Time: at(time.Second)})
		}
		ok(t, s.SaveRun(ctx, r, batch...))
		evs, err := s.Events(ctx, "r1", 9, 0)
		ok(t, err)
		same(t, seqs(evs), []uint64{10, 11, 12})
		same(t, evs[2].Message, "m10")
		same(t, evs[2].Time, at(time.Second))
	})

	t.Run("saving a run that was never created is ErrNotFound", func(t *testing.T) {
		s, _ := open(t)
		errIs(t, s.SaveRun(ctx, newRun("ghost", "pb", at(0))), state.ErrNotFound)
		_, err := s.GetRun(ctx, "ghost")
		errIs(t, err, state.ErrNotFound)
	})

	t.Run("a run created without a time gets one", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", time.Time{})
		create(t, s, r)
		got, err := s.GetRun(ctx, "r1")
		ok(t, err)
		if got.CreatedAt.IsZero() {
			t.Fatal("stored run has no CreatedAt")
		}
	})
}

func testListRuns(t *testing.T, open opener) {
	// Created out of order so that insertion order is not creation order.
	seed := func(t *testing.T) state.Store {
		s, _ := open(t)
		runs := []*state.Run{
			{ID: "b", Playbook: "upgrade", Status: state.RunSucceeded, CreatedAt: at(2 * time.Minute)},
			{ID: "a", Playbook: "digest", Status: state.RunFailed, CreatedAt: at(1 * time.Minute)},
			{ID: "d", Playbook: "upgrade", Status: state.RunRunning, CreatedAt: at(4 * time.Minute)},
			{ID: "c", Playbook: "sub", Status: state.RunSucceeded, ParentID: "b", ParentStep: "s", CreatedAt: at(3 * time.Minute)},
			{ID: "e", Playbook: "sub", Status: state.RunPending, ParentID: "d", CreatedAt: at(5 * time.Minute)},
			{ID: "old", Playbook: "upgrade", Status: state.RunCancelled, CreatedAt: time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC)},
		}
		for _, r := range runs {
			create(t, s, r)
		}
		return s
	}
	cases := []struct {
		name   string
		filter state.RunFilter
		want   []string
	}{
		{"no filter lists every run newest first", state.RunFilter{}, []string{"e", "d", "c", "b", "a", "old"}},
		{"a status filter keeps runs with that status", state.RunFilter{Status: []state.RunStatus{state.RunSucceeded}}, []string{"c", "b"}},
		{"several statuses match any of them", state.RunFilter{Status: []state.RunStatus{state.RunFailed, state.RunRunning}}, []string{"d", "a"}},
		{"a playbook filter keeps that playbook's runs", state.RunFilter{Playbook: "upgrade"}, []string{"d", "b", "old"}},
		{"a parent filter keeps that parent's children", state.RunFilter{ParentID: "b"}, []string{"c"}},
		{"filters combine", state.RunFilter{Playbook: "upgrade", Status: []state.RunStatus{state.RunSucceeded, state.RunCancelled}}, []string{"b", "old"}},
		{"a limit keeps the newest matches", state.RunFilter{Playbook: "upgrade", Limit: 2}, []string{"d", "b"}},
		{"a limit larger than the matches returns them all", state.RunFilter{Limit: 100}, []string{"e", "d", "c", "b", "a", "old"}},
		{"a filter matching nothing returns no runs", state.RunFilter{Playbook: "none"}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := seed(t)
			runs, err := s.ListRuns(ctx, tc.filter)
			ok(t, err)
			same(t, runIDs(runs), tc.want)
		})
	}

	t.Run("a status filter sees the status a run was last saved with", func(t *testing.T) {
		s := seed(t)
		r, err := s.GetRun(ctx, "d")
		ok(t, err)
		r.Status = state.RunSucceeded
		ok(t, s.SaveRun(ctx, r))
		runs, err := s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunSucceeded}})
		ok(t, err)
		same(t, runIDs(runs), []string{"d", "c", "b"})
		runs, err = s.ListRuns(ctx, state.RunFilter{Status: []state.RunStatus{state.RunRunning}})
		ok(t, err)
		same(t, runIDs(runs), []string{})
	})

	t.Run("runs created at the same instant are all listed", func(t *testing.T) {
		s, _ := open(t)
		for _, id := range []string{"x", "y", "z"} {
			create(t, s, newRun(id, "pb", at(0)))
		}
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		if len(runs) != 3 {
			t.Fatalf("listed %v, want x, y and z", runIDs(runs))
		}
	})

	t.Run("listed runs carry their full record", func(t *testing.T) {
		s, _ := open(t)
		r := newRun("r1", "pb", at(0))
		r.Inputs = map[string]any{"k": "v"}
		r.Snapshot = []byte("snapshot")
		create(t, s, r)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runs, []*state.Run{r})
	})

	t.Run("an empty store lists no runs", func(t *testing.T) {
		s, _ := open(t)
		runs, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		if len(runs) != 0 {
			t.Fatalf("listed %v", runIDs(runs))
		}
	})
}
