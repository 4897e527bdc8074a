package statetest

import (
	"context"
	"errors"
	"testing"

	"github.com/runbook/runbook/internal/state"
)

// RunRunPauses runs the contract of state.RunPauseStore (run pauses)
// against stores from open, one fresh and empty store per test.
func RunRunPauses(t *testing.T, open func(t *testing.T) state.RunPauseStore) {
	t.Helper()
	t.Run("a pause is kept with its selector, reason and author, listed oldest first", func(t *testing.T) { testRunPauses(t, open(t)) })
	t.Run("a second pause of one selector or one ID is refused", func(t *testing.T) { testRunPauseTwice(t, open(t)) })
	t.Run("a resume deletes its own pause only and returns it", func(t *testing.T) { testRunResume(t, open(t)) })
}

func testRunPauses(t *testing.T, s state.RunPauseStore) {
	ctx := context.Background()
	got, err := s.RunPauses(ctx)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("a new store has run pauses: %+v", got)
	}
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p2", Label: "team=platform", Reason: "change freeze", By: "alice", At: at0.Add(1)}))
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p1", Pattern: "nks-*", Reason: "cluster maintenance", By: "bob", At: at0}))
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p3", Pattern: "backup", Reason: "disk full", By: "carol", At: at0.Add(2)}))

	got, err = s.RunPauses(ctx)
	must(t, err)
	if len(got) != 3 || got[0].ID != "p1" || got[1].ID != "p2" || got[2].ID != "p3" {
		t.Fatalf("run pauses listed %+v, want p1, p2, p3 (oldest first)", got)
	}
	if p := got[1]; p.Label != "team=platform" || p.Pattern != "" || p.Reason != "change freeze" || p.By != "alice" || !p.At.Equal(at0.Add(1)) {
		t.Errorf("pause kept as %+v, want its label, reason, author and time", p)
	}
	if p := got[0]; p.Pattern != "nks-*" || p.Why() != "paused by bob: cluster maintenance" {
		t.Errorf("pause kept as %+v (%q)", p, p.Why())
	}
	if !got[0].Selects("nks-upgrade", nil) || got[0].Selects("backup", nil) ||
		!got[1].Selects("x", map[string]string{"team": "platform"}) || got[1].Selects("x", map[string]string{"team": "ml"}) {
		t.Error("Selects: a pattern selects by name, a label by the playbook's labels")
	}
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p4", Pattern: "other", Reason: "no time given", By: "dan"}))
	got, err = s.RunPauses(ctx)
	must(t, err)
	for _, p := range got {
		if p.ID == "p4" && p.At.IsZero() {
			t.Errorf("a pause without a time was not given one: %+v", p)
		}
	}
}

func testRunPauseTwice(t *testing.T, s state.RunPauseStore) {
	ctx := context.Background()
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p1", Pattern: "nks-*", Reason: "one", By: "alice"}))
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p2", Label: "nks-*=x", Reason: "a label is not a pattern", By: "alice"}))
	if err := s.PauseRuns(ctx, state.RunPause{ID: "p3", Pattern: "nks-*", Reason: "two", By: "bob"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("a second pause of nks-*: %v, want ErrExists", err)
	}
	if err := s.PauseRuns(ctx, state.RunPause{ID: "p1", Pattern: "other", Reason: "two", By: "bob"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("a second pause p1: %v, want ErrExists", err)
	}
	got, err := s.RunPauses(ctx)
	must(t, err)
	if len(got) != 2 || got[0].Reason != "one" {
		t.Fatalf("after the refusals: %+v, want the first two pauses as they were", got)
	}
}

func testRunResume(t *testing.T, s state.RunPauseStore) {
	ctx := context.Background()
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p1", Pattern: "nks-*", Reason: "one", By: "alice", At: at0}))
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p2", Label: "team=ml", Reason: "two", By: "bob", At: at0.Add(1)}))
	p, err := s.ResumeRuns(ctx, "p1")
	must(t, err)
	if p.ID != "p1" || p.Pattern != "nks-*" || p.Reason != "one" {
		t.Errorf("resume returned %+v, want pause p1", p)
	}
	if _, err := s.ResumeRuns(ctx, "p1"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a second resume of p1: %v, want ErrNotFound", err)
	}
	got, err := s.RunPauses(ctx)
	must(t, err)
	if len(got) != 1 || got[0].ID != "p2" {
		t.Fatalf("after the resume: %+v, want p2 only", got)
	}
	must(t, s.PauseRuns(ctx, state.RunPause{ID: "p3", Pattern: "nks-*", Reason: "again", By: "carol"}))
}
