package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state"
)

// testListPaging checks RunFilter.Before (keyset paging) and
// RunFilter.TriggerKey.
func testListPaging(t *testing.T, open opener) {
	// 13 runs, three at each instant (nanoseconds apart: a store that kept
	// microseconds would tie them), of two playbooks, two statuses and
	// trigger keys k0..k3.
	seed := func(t *testing.T) state.Store {
		s, _ := open(t)
		for i := range 13 {
			r := newRun(fmt.Sprintf("run-%02d", 12-i), []string{"upgrade", "digest"}[i%2], at(time.Duration(i/3)))
			r.Status = []state.RunStatus{state.RunSucceeded, state.RunFailed}[i%3%2]
			r.Trigger = map[string]any{"type": "webhook", "key": fmt.Sprint("k", i%4)}
			create(t, s, r)
		}
		return s
	}
	pages := func(t *testing.T, s state.Store, f state.RunFilter) []string {
		t.Helper()
		var out []string
		f.Before = nil
		for range 20 {
			page, err := s.ListRuns(ctx, f)
			ok(t, err)
			if len(page) > f.Limit {
				t.Fatalf("a page of %d runs, limit %d", len(page), f.Limit)
			}
			if len(page) == 0 {
				return out
			}
			out = append(out, runIDs(page)...)
			f.Before = state.CursorAfter(page[len(page)-1])
		}
		t.Fatal("paging does not end")
		return nil
	}
	for _, f := range []state.RunFilter{
		{},
		{Playbook: "upgrade"},
		{Status: []state.RunStatus{state.RunFailed}},
		{Playbook: "digest", Status: []state.RunStatus{state.RunSucceeded}},
		{TriggerKey: "k1"},
	} {
		t.Run(fmt.Sprintf("pages follow on without gaps or repeats %+v", f), func(t *testing.T) {
			s := seed(t)
			all, err := s.ListRuns(ctx, f)
			ok(t, err)
			if len(all) < 3 {
				t.Fatalf("the filter matches %v: too few to page", runIDs(all))
			}
			for _, limit := range []int{1, 2, 4} {
				f.Limit = limit
				same(t, pages(t, s, f), runIDs(all))
			}
		})
	}

	t.Run("a run created while paging does not shift the pages", func(t *testing.T) {
		s := seed(t)
		first, err := s.ListRuns(ctx, state.RunFilter{Limit: 4})
		ok(t, err)
		create(t, s, newRun("newest", "upgrade", at(time.Hour)))
		next, err := s.ListRuns(ctx, state.RunFilter{Limit: 4, Before: state.CursorAfter(first[3])})
		ok(t, err)
		all, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		same(t, runIDs(next), runIDs(all[5:9]))
	})

	t.Run("the position of a deleted run still pages", func(t *testing.T) {
		s := seed(t)
		all, err := s.ListRuns(ctx, state.RunFilter{})
		ok(t, err)
		ok(t, s.DeleteRun(ctx, all[4].ID))
		rest, err := s.ListRuns(ctx, state.RunFilter{Before: state.CursorAfter(all[4])})
		ok(t, err)
		same(t, runIDs(rest), runIDs(all[5:]))
	})

	t.Run("a cursor before a time lists the runs created before it", func(t *testing.T) {
		s := seed(t)
		runs, err := s.ListRuns(ctx, state.RunFilter{Before: state.CursorBefore(at(1))})
		ok(t, err)
		same(t, runIDs(runs), []string{"run-12", "run-11", "run-10"})
		runs, err = s.ListRuns(ctx, state.RunFilter{Before: state.CursorBefore(at(0))})
		ok(t, err)
		same(t, runIDs(runs), []string{})
	})

	t.Run("a trigger key filter keeps the runs of that key", func(t *testing.T) {
		s := seed(t)
		runs, err := s.ListRuns(ctx, state.RunFilter{TriggerKey: "k3"})
		ok(t, err)
		same(t, runIDs(runs), []string{"run-01", "run-05", "run-09"})
		runs, err = s.ListRuns(ctx, state.RunFilter{TriggerKey: "k3", Playbook: "digest"})
		ok(t, err)
		same(t, runIDs(runs), []string{"run-01", "run-05", "run-09"})
		runs, err = s.ListRuns(ctx, state.RunFilter{TriggerKey: "none"})
		ok(t, err)
		same(t, runIDs(runs), []string{})
	})
}
