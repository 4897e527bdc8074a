package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/trigger"
)

// seedRuns writes runs into a new state file: n runs, a second apart, of
// playbooks pb-0..pb-2 with statuses and triggers in turn, every tenth a
// sub-playbook run. It returns the file and the runs, newest first.
func seedRuns(t *testing.T, n int) (string, []*state.Run) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	store, err := bolt.Open(path, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	defer store.Close()
	statuses := []state.RunStatus{state.RunSucceeded, state.RunFailed, state.RunCancelled}
	triggers := []string{"api", "schedule", "webhook"}
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var runs []*state.Run
	for i := range n {
		r := &state.Run{ID: fmt.Sprintf("20261101T%06d-%06x", i, i), Playbook: fmt.Sprintf("pb-%d", i%3), Hash: "h",
			Snapshot: []byte("version: 1\n"), Status: statuses[(i/3)%3], Trigger: map[string]any{"type": triggers[(i/9)%3]},
			CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if i%10 == 9 {
			r.ParentID, r.ParentStep = "20261101T000000-000000", "call"
		}
		require.NoError(t, store.CreateRun(context.Background(), r))
		runs = append([]*state.Run{r}, runs...)
	}
	return path, runs
}

// pages lists every run the query selects, page by page, and the number
// of pages.
func (e *env) pages(query url.Values) ([]string, int) {
	e.t.Helper()
	var ids []string
	n := 0
	for {
		r := e.api("GET", "/api/v1/runs?"+query.Encode(), nil)
		require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
		var p api.RunList
		require.NoError(e.t, json.Unmarshal(r.body, &p))
		n++
		require.False(e.t, n > 1 && len(p.Runs) == 0, "a page's next led to an empty page")
		for _, run := range p.Runs {
			ids = append(ids, run.ID)
		}
		if p.Next == "" {
			return ids, n
		}
		require.Less(e.t, n, 1000, "paging does not end")
		query.Set("before", p.Next)
	}
}

func TestRunPagesHoldEveryRunOnce(t *testing.T) {
	statePath, runs := seedRuns(t, 250)
	e := start(t, t.TempDir(), statePath, nil)
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
	typ := func(r *state.Run) string { return r.Trigger["type"].(string) }

	for _, tc := range []struct {
		name  string
		query url.Values
		keep  func(*state.Run) bool
	}{
		{"every run but sub-playbook runs, newest first", url.Values{"limit": {"40"}}, top},
		{"with sub-playbook runs", url.Values{"limit": {"33"}, "children": {"true"}}, func(*state.Run) bool { return true }},
		{"failed ones", url.Values{"status": {"failed"}}, func(r *state.Run) bool { return top(r) && r.Status == state.RunFailed }},
		{"failed or cancelled of one playbook", url.Values{"status": {"failed,cancelled"}, "playbook": {"pb-1"}, "limit": {"7"}},
			func(r *state.Run) bool { return top(r) && r.Playbook == "pb-1" && r.Status != state.RunSucceeded }},
		{"started by webhooks", url.Values{"trigger": {"webhook"}, "limit": {"9"}}, func(r *state.Run) bool { return top(r) && typ(r) == "webhook" }},
		{"created in a window", url.Values{"since": {"2026-11-01T00:01:00Z"}, "until": {"2026-11-01T00:02:00Z"}, "limit": {"11"}},
			func(r *state.Run) bool {
				return top(r) && !r.CreatedAt.Before(time.Date(2026, 11, 1, 0, 1, 0, 0, time.UTC)) && r.CreatedAt.Before(time.Date(2026, 11, 1, 0, 2, 0, 0, time.UTC))
			}},
		{"nothing matches", url.Values{"playbook": {"none"}}, func(*state.Run) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := e.pages(tc.query)
			assert.Equal(t, want(tc.keep), got)
		})
	}

	t.Run("a page keeps its place when newer runs arrive", func(t *testing.T) {
		r := e.api("GET", "/api/v1/runs?limit=10", nil)
		var first api.RunList
		require.NoError(t, json.Unmarshal(r.body, &first))
		// A run newer than all of them.
		e.writeFile(t, "quick.yaml", "version: 1\nname: quick\nsteps:\n  - id: a\n    uses: log\n    with: {message: hi}\n")
		require.Equal(t, 200, e.api("POST", "/api/v1/reload", nil).status)
		require.Equal(t, 201, e.api("POST", "/api/v1/playbooks/quick/runs", nil).status)
		r = e.api("GET", "/api/v1/runs?limit=10&before="+url.QueryEscape(first.Next), nil)
		var second api.RunList
		require.NoError(t, json.Unmarshal(r.body, &second))
		require.NotEmpty(t, second.Runs)
		assert.Equal(t, want(top)[10], second.Runs[0].ID)
	})

	t.Run("a page link of an earlier build (offset.nanos.ID) still pages", func(t *testing.T) {
		tenth := runs[9]
		r := e.api("GET", fmt.Sprintf("/api/v1/runs?limit=5&children=true&before=%d.%d.%s", 9, tenth.CreatedAt.UnixNano(), tenth.ID), nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var p api.RunList
		require.NoError(t, json.Unmarshal(r.body, &p))
		var got []string
		for _, run := range p.Runs {
			got = append(got, run.ID)
		}
		assert.Equal(t, []string{runs[10].ID, runs[11].ID, runs[12].ID, runs[13].ID, runs[14].ID}, got)
	})

	for _, bad := range []struct{ query, says string }{
		{"limit=0", "limit must be an integer in 1..10000"},
		{"limit=10001", "limit must be an integer in 1..10000"},
		{"status=nope", `unknown status "nope" (pending, running, waiting, suspended, interrupted, succeeded, failed, cancelled, skipped)`},
		{"since=yesterday", `since "yesterday" is not a time (2026-11-22T09:00:00Z, or a date 2026-11-22)`},
		{"before=x", `before: cursor "x" is not a cursor from a page's next`},
	} {
		t.Run("refuses "+bad.query, func(t *testing.T) {
			r := e.api("GET", "/api/v1/runs?"+bad.query, nil)
			assert.Equal(t, http.StatusBadRequest, r.status)
			assert.Equal(t, "invalid", r.json(t)["code"])
			assert.Equal(t, bad.says, r.json(t)["error"])
		})
	}
	t.Run("asks for the token", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/api/v1/runs", "", nil).status)
		assert.Equal(t, http.StatusUnauthorized, e.do("GET", "/api/v1/runs/page", "", nil).status)
	})
	t.Run("the former /runs/page answers as /runs does", func(t *testing.T) {
		query := "status=failed&trigger=webhook&children=true&limit=3"
		page, list := e.api("GET", "/api/v1/runs/page?"+query, nil), e.api("GET", "/api/v1/runs?"+query, nil)
		require.Equal(t, http.StatusOK, list.status, "%s", list.body)
		assert.Equal(t, http.StatusOK, page.status)
		assert.JSONEq(t, string(list.body), string(page.body))
	})
}

func (e *env) writeFile(t *testing.T, name, src string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), []byte(src), 0o600))
}

const definitionPlaybook = `version: 1
name: def
inputs:
  cluster: {type: string, pattern: '^[a-z-]+$', default: prod-a, description: the cluster}
  nodes: {type: integer, min: 1, max: 10, default: 2}
  password: {type: string, secret: true, default: hunter2-secret}
steps:
  - id: greet
    uses: set
    with: {values: {msg: "hello ${{ inputs.cluster }}"}}
  - id: find
    uses: nks.cluster.get
    with: {cluster: "${{ steps.greet.outputs.values.msg }}"}
  - id: later
    needs: [greet]
    uses: log
    with: {message: "pw ${{ inputs.password }}"}
finally:
  - id: bye
    uses: log
    with: {message: bye}
`

func TestDefinitions(t *testing.T) {
	e := newEnv(t, map[string]string{"def.yaml": definitionPlaybook})

	t.Run("of a playbook: source, constrained inputs, steps as written", func(t *testing.T) {
		r := e.api("GET", "/api/v1/playbooks/def/definition", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var d api.Definition
		require.NoError(t, json.Unmarshal(r.body, &d))
		assert.Equal(t, definitionPlaybook, d.Source)
		require.Len(t, d.Inputs, 3)
		assert.Equal(t, "^[a-z-]+$", d.Inputs[0].Pattern)
		require.NotNil(t, d.Inputs[1].Min)
		assert.Equal(t, 10.0, *d.Inputs[1].Max)
		assert.Nil(t, d.Inputs[2].Default, "a secret input's default is never shown")
		require.Len(t, d.Lists, 2)
		assert.Equal(t, "finally", d.Lists[1].Name)
		assert.Nil(t, d.Lists[0].Steps[1].Needs, "written without needs: after every earlier step")
		assert.Equal(t, []string{"greet"}, d.Lists[0].Steps[2].Needs)
		assert.Empty(t, d.Lists[0].Steps[1].Calls, "a playbook has no calls made")
	})

	t.Run("of a run: the params its steps ran with and the calls they made", func(t *testing.T) {
		id := e.api("POST", "/api/v1/playbooks/def/runs", map[string]any{"inputs": map[string]any{"password": "hunter2-given"}}).json(t)["id"].(string)
		e.waitStatus(id, state.RunFailed, state.RunSucceeded)
		r := e.api("GET", "/api/v1/runs/"+id+"/definition", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.NotContains(t, string(r.body), "hunter2", "a secret never reaches the answer")
		var d api.Definition
		require.NoError(t, json.Unmarshal(r.body, &d))
		assert.Empty(t, d.Source, "a run's snapshot source is not sent")
		find := d.Lists[0].Steps[1]
		require.Equal(t, "find", find.ID)
		require.Len(t, find.With, 1)
		assert.Equal(t, "hello prod-a", find.With[0].Value)
		assert.True(t, find.With[0].Known)
		require.Len(t, find.Calls, 1, "%+v", find)
		assert.Equal(t, "GET", find.Calls[0].Method)
		assert.Contains(t, find.Calls[0].Path, url.PathEscape("hello prod-a"))
		later := d.Lists[0].Steps[2]
		if len(later.With) > 0 {
			assert.Equal(t, "pw ***", later.With[0].Value)
		}
	})

	t.Run("of an unknown run", func(t *testing.T) {
		assert.Equal(t, 404, e.api("GET", "/api/v1/runs/nope/definition", nil).status)
	})
}

func TestDeliveriesAreLogged(t *testing.T) {
	e := newEnv(t, map[string]string{"hook.yaml": hookPlaybook})
	e.deliver("hook-secret", unsubscribeBody)
	e.deliver("hook-secret", unsubscribeBody)
	e.deliver("wrong", unsubscribeBody)
	e.deliver("hook-secret", `{"hooksId":"h-2","event":"UNSUBSCRIBE","hooks":[{}]}`)

	r := e.api("GET", "/api/v1/deliveries", nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	var list api.DeliveryList
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Deliveries, 4)
	malformed, forged, dup, first := list.Deliveries[0], list.Deliveries[1], list.Deliveries[2], list.Deliveries[3]

	assert.Equal(t, "accepted", first.Outcome)
	assert.Equal(t, "sms", first.Route)
	assert.Equal(t, "h-1", first.ID)
	assert.Equal(t, "UNSUBSCRIBE", first.Event)
	assert.Equal(t, 1, first.Hooks)
	require.Len(t, first.Runs, 1)
	assert.Equal(t, 200, e.api("GET", "/api/v1/runs/"+first.Runs[0], nil).status)

	assert.Equal(t, "duplicate", dup.Outcome)
	assert.Equal(t, first.Runs, dup.Runs, "a duplicate names the first delivery's runs")

	assert.Equal(t, "refused", forged.Outcome)
	assert.Equal(t, 401, forged.Status)
	assert.Equal(t, "unauthorized", forged.Code)

	assert.Equal(t, "refused", malformed.Outcome)
	assert.Equal(t, 400, malformed.Status)
	assert.Contains(t, malformed.Error, "hookId")
	assert.Equal(t, "h-2", malformed.ID)

	e.deliver("hook-secret", hooksBody(t, "h-big", 150))
	r = e.api("GET", "/api/v1/deliveries?limit=1", nil)
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Deliveries, 1)
	big := list.Deliveries[0]
	assert.Equal(t, "h-big", big.ID)
	assert.Equal(t, 150, big.Hooks)
	assert.Len(t, big.Runs, 100, "a logged delivery keeps the first 100 runs")
	assert.Equal(t, 150, big.RunsTotal)

	r = e.api("GET", "/api/v1/deliveries?outcome=refused", nil)
	require.NoError(t, json.Unmarshal(r.body, &list))
	assert.Len(t, list.Deliveries, 2)
	assert.Equal(t, 400, e.api("GET", "/api/v1/deliveries?outcome=maybe", nil).status)
}

func TestSchedulesShowTheirSlots(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "state.db")
	now := time.Now().UTC()
	slot := now.Truncate(time.Minute).Add(-3 * time.Minute)
	const tick = "version: 1\nname: tick\ntriggers:\n  - schedule: {cron: \"* * * * *\", overlap: skip}\nsteps:\n  - id: a\n    uses: log\n    with: {message: hi}\n"
	pb, err := playbook.Parse("tick.yaml", []byte(tick), playbook.LoadOptions{})
	require.NoError(t, err)
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.CreateRun(ctx, &state.Run{ID: "20261101T000000-aaaaaa", Playbook: "tick", Hash: "h", Snapshot: []byte("x"),
		Status: state.RunSucceeded, Trigger: map[string]any{"type": "schedule", "slot": slot.Format(time.RFC3339)}}))
	// The scheduler last handled the slot a minute after the one with a run.
	last := slot.Add(time.Minute)
	require.NoError(t, store.PutCursor(ctx, trigger.CursorKey("tick", 0, pb.Triggers[0].Schedule), []byte(last.Format(time.RFC3339Nano))))
	require.NoError(t, store.Close())

	e := start(t, t.TempDir(), statePath, map[string]string{"tick.yaml": tick}, func(o *server.Options) { o.Schedules = false })
	r := e.api("GET", "/api/v1/schedules", nil)
	answered := time.Now().UTC() // the recent slots are those before the answer
	require.Equal(t, 200, r.status, "%s", r.body)
	var list api.ScheduleList
	require.NoError(t, json.Unmarshal(r.body, &list))
	assert.False(t, list.Enabled)
	require.Len(t, list.Schedules, 1)
	sc := list.Schedules[0]
	assert.Equal(t, "tick", sc.Playbook)
	assert.Len(t, sc.Next, 3)
	require.Len(t, sc.Recent, 10)
	assert.Equal(t, last.Format(time.RFC3339), sc.Last)
	found, missed := false, 0
	for i, sl := range sc.Recent {
		ts, err := time.Parse(time.RFC3339, sl.Slot)
		require.NoError(t, err)
		assert.False(t, ts.After(answered), "a recent slot is not in the future")
		if i > 0 {
			prev, _ := time.Parse(time.RFC3339, sc.Recent[i-1].Slot)
			assert.Equal(t, time.Minute, prev.Sub(ts), "newest first, a minute apart")
		}
		if ts.Equal(slot) {
			found = true
			assert.Equal(t, "20261101T000000-aaaaaa", sl.Run)
			assert.Equal(t, state.RunSucceeded, sl.Status)
		} else {
			assert.Empty(t, sl.Run)
			switch {
			case ts.After(last):
				assert.Contains(t, sl.Note, "not fired", sl.Slot)
				missed++
			case ts.After(slot):
				assert.Contains(t, sl.Note, "handled without a run", sl.Slot)
				missed++
			default:
				assert.Contains(t, sl.Note, "before the first run", sl.Slot)
			}
		}
	}
	assert.True(t, found, "the slot that has a run")
	assert.Equal(t, missed, sc.Missed)
	assert.GreaterOrEqual(t, missed, 2, "the slot between the run and the last handled, and the one not fired since")
}
