package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

// GET /api/v1/runs pages by keyset: each answer's next, passed as before,
// lists the runs that follow, until a list comes without a next.
func TestTheRunListPagesWithBefore(t *testing.T) {
	statePath, runs := seedRuns(t, 120)
	e := start(t, t.TempDir(), statePath, nil)
	list := func(query url.Values) (ids []string, lists int) {
		t.Helper()
		for {
			r := e.api("GET", "/api/v1/runs?"+query.Encode(), nil)
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var l api.RunList
			require.NoError(t, json.Unmarshal(r.body, &l))
			lists++
			for _, run := range l.Runs {
				ids = append(ids, run.ID)
			}
			if l.Next == "" {
				return ids, lists
			}
			require.Less(t, lists, 100, "paging does not end")
			query.Set("before", l.Next)
		}
	}
	want := func(keep func(*state.Run) bool) []string {
		var ids []string
		for _, r := range runs {
			if keep(r) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	top := func(r *state.Run) bool { return r.ParentID == "" }

	got, lists := list(url.Values{"limit": {"25"}})
	assert.Equal(t, want(top), got)
	assert.Equal(t, 5, lists, "108 top-level runs: four lists of 25, then 8")

	got, _ = list(url.Values{"limit": {"7"}, "children": {"true"}, "status": {"failed"}})
	assert.Equal(t, want(func(r *state.Run) bool { return r.Status == state.RunFailed }), got)

	got, lists = list(url.Values{"limit": {"1000"}})
	assert.Equal(t, want(top), got)
	assert.Equal(t, 1, lists, "no next when every run is listed")

	r := e.api("GET", "/api/v1/runs?before=nope", nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Equal(t, "invalid", r.json(t)["code"])
}
