package statetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// testRecentRuns checks RecentRuns: the newest n runs of each playbook
// asked for, newest first, as ListRuns of that playbook lists them.
func testRecentRuns(t *testing.T, open opener) {
	s, _ := open(t)
	// upgrade has 7 runs, digest 2, notice 1 (a sub-playbook run), and
	// other 3, interleaved; two runs of upgrade share an instant.
	plan := []string{"upgrade", "digest", "upgrade", "other", "upgrade", "upgrade", "other", "digest", "upgrade", "upgrade", "other", "upgrade", "notice"}
	for i, pb := range plan {
		r := newRun(fmt.Sprintf("run-%02d", i), pb, at(time.Duration(i/2*2)*time.Second))
		r.Status = []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunRunning}[i%3]
		if pb == "notice" {
			r.ParentID = "run-00"
		}
		create(t, s, r)
	}
	got, err := s.RecentRuns(ctx, []string{"upgrade", "digest", "notice", "missing"}, 3)
	ok(t, err)
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"digest", "notice", "upgrade"}) {
		t.Fatalf("playbooks %v, want digest, notice and upgrade (not other, not missing)", keys)
	}
	for _, pb := range keys {
		want, err := s.ListRuns(ctx, state.RunFilter{Playbook: pb, Limit: 3})
		ok(t, err)
		if !slices.Equal(runIDs(got[pb]), runIDs(want)) {
			t.Errorf("%s: %v, want %v as ListRuns lists them", pb, runIDs(got[pb]), runIDs(want))
		}
		for i, r := range got[pb] {
			if r.Playbook != pb || r.Status != want[i].Status || !r.CreatedAt.Equal(want[i].CreatedAt) {
				t.Errorf("%s: run %s read as %+v, listed as %+v", pb, r.ID, r, want[i])
			}
		}
	}
	if ids := runIDs(got["upgrade"]); !slices.Equal(ids, []string{"run-11", "run-09", "run-08"}) {
		t.Errorf("upgrade: %v, want its newest three, newest first", ids)
	}
	if none, err := s.RecentRuns(ctx, []string{"upgrade"}, 0); err != nil || len(none) != 0 {
		t.Errorf("n 0: %v, %v; want nothing", none, err)
	}
}
