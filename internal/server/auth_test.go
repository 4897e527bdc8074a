package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
)

// people are the config users of the auth tests, by name: their roles,
// playbook patterns and tokens.
var people = map[string]struct {
	roles, playbooks []string
	token            string
}{
	"vera":  {roles: []string{"viewer"}, token: "tok-viewer-0000000000000000000000000000"},
	"otto":  {roles: []string{"operator"}, token: "tok-operator-000000000000000000000000000"},
	"alice": {roles: []string{"approver"}, token: "tok-approver-alice-00000000000000000000"},
	"bob":   {roles: []string{"approver"}, token: "tok-approver-bob-0000000000000000000000"},
	"carol": {roles: []string{"operator", "approver"}, token: "tok-operator-approver-carol-000000000000"},
	"root":  {roles: []string{"admin"}, token: "tok-admin-00000000000000000000000000000000"},
	"ada":   {roles: []string{"agent"}, token: "tok-agent-ada-0000000000000000000000000"},
	"nksop": {roles: []string{"operator"}, playbooks: []string{"nks-*"}, token: "tok-nks-operator-000000000000000000000"},
	"mlop":  {roles: []string{"operator"}, playbooks: []string{"label:team=ml*"}, token: "tok-ml-operator-0000000000000000000000"},
}

func withPeople(o *server.Options) {
	for name, p := range people {
		o.Auth.Users = append(o.Auth.Users, auth.User{Name: name, Roles: p.roles, Playbooks: p.playbooks, TokenSHA256: auth.HashToken(p.token)})
	}
}

func (e *env) as(who, method, path string, body any) reply {
	e.t.Helper()
	return e.do(method, path, people[who].token, body)
}

// newRun starts a run of gate as the server token and waits until it
// waits for its approval.
func (e *env) newRun() string {
	e.t.Helper()
	r := e.api("POST", "/api/v1/playbooks/gate/runs", nil)
	require.Equal(e.t, 201, r.status, "%s", r.body)
	id := r.json(e.t)["id"].(string)
	e.waitStep(id, "ok", state.StepWaiting)
	return id
}

// cancelledRun is a run of gate, cancelled.
func (e *env) cancelledRun() string {
	e.t.Helper()
	id := e.newRun()
	require.Equal(e.t, 202, e.api("POST", "/api/v1/runs/"+id+"/cancel", nil).status)
	e.waitStatus(id, state.RunCancelled)
	return id
}

// TestPermissionMatrix calls every API route as each role, as someone
// with no token and as someone with a bad one, through the real server:
// a role allowed the route's permission gets 2xx, any other 403 naming
// the permission, no token 401.
func TestPermissionMatrix(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "yearly.yaml": yearlyPlaybook}, withPeople)
	var seq atomic.Int64
	// Each case makes the fixture it needs and returns the request.
	type call struct {
		path string
		body any
		ok   int // the status of an allowed call when not 2xx
	}
	cases := map[string]struct {
		perm auth.Permission
		make func() call
	}{
		"GET /api/v1/playbooks":              {auth.ReadPlaybooks, func() call { return call{path: "/api/v1/playbooks"} }},
		"GET /api/v1/playbooks/{name}":       {auth.ReadPlaybooks, func() call { return call{path: "/api/v1/playbooks/gate"} }},
		"POST /api/v1/playbooks/{name}/runs": {auth.StartRuns, func() call { return call{path: "/api/v1/playbooks/gate/runs", body: map[string]any{}} }},
		"GET /api/v1/runs":                   {auth.ReadRuns, func() call { return call{path: "/api/v1/runs"} }},
		"GET /api/v1/runs/{id}":              {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun()} }},
		"GET /api/v1/runs/{id}/events":       {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/events"} }},
		"GET /api/v1/runs/{id}/logs":         {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/logs"} }},
		"GET /api/v1/runs/{id}/output":       {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/output"} }},
		"POST /api/v1/runs/{id}/cancel":      {auth.CancelRuns, func() call { return call{path: "/api/v1/runs/" + e.newRun() + "/cancel", body: map[string]any{}} }},
		"POST /api/v1/runs/{id}/approve": {auth.ApproveRuns, func() call {
			return call{path: "/api/v1/runs/" + e.newRun() + "/approve", body: map[string]any{"approve": true}}
		}},
		"POST /api/v1/runs/{id}/retry":  {auth.RetryRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/retry", body: map[string]any{}} }},
		"POST /api/v1/runs/{id}/resume": {auth.ResumeRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/resume", body: map[string]any{}} }},
		"POST /api/v1/runs/{id}/rerun":  {auth.StartRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/rerun", body: map[string]any{}} }},
		"POST /api/v1/reload":           {auth.Reload, func() call { return call{path: "/api/v1/reload", body: map[string]any{}} }},
		"GET /api/v1/drain":             {auth.ReadRuns, func() call { return call{path: "/api/v1/drain"} }},
		// An invalid grace (400) is answered after the permission check, and drains nothing.
		"POST /api/v1/drain": {auth.Admin, func() call { return call{path: "/api/v1/drain", body: map[string]any{"grace": "nope"}, ok: 400} }},
		"GET /api/v1/whoami": {"", func() call { return call{path: "/api/v1/whoami"} }},
		"GET /api/v1/tokens": {auth.ManageTokens, func() call { return call{path: "/api/v1/tokens"} }},
		"POST /api/v1/tokens": {auth.ManageTokens, func() call {
			return call{path: "/api/v1/tokens", body: map[string]any{"name": fmt.Sprintf("bot-%d", seq.Add(1)), "roles": []string{"viewer"}}}
		}},
		"DELETE /api/v1/tokens/{name}": {auth.ManageTokens, func() call {
			name := fmt.Sprintf("doomed-%d", seq.Add(1))
			r := e.as("root", "POST", "/api/v1/tokens", map[string]any{"name": name, "roles": []string{"viewer"}})
			require.Equal(t, 201, r.status, "%s", r.body)
			return call{path: "/api/v1/tokens/" + name}
		}},
		"GET /api/v1/audit":  {auth.ReadAudit, func() call { return call{path: "/api/v1/audit"} }},
		"GET /api/v1/agents": {auth.ReadRuns, func() call { return call{path: "/api/v1/agents"} }},
		"POST /api/v1/agent/register": {auth.WorkAsAgent, func() call {
			return call{path: "/api/v1/agent/register", body: map[string]any{"name": "a1", "labels": map[string]string{"role": "x"}, "capacity": 1, "key": make([]byte, 32)}}
		}},
		// A session or an assignment the server does not hold: 409 once allowed.
		"POST /api/v1/agent/poll": {auth.WorkAsAgent, func() call {
			return call{path: "/api/v1/agent/poll", body: map[string]any{"session": "s-none"}, ok: 409}
		}},
		"POST /api/v1/agent/assignments/{id}/lines": {auth.WorkAsAgent, func() call {
			return call{path: "/api/v1/agent/assignments/a-none/lines", body: map[string]any{"session": "s-none"}, ok: 409}
		}},
		"POST /api/v1/agent/assignments/{id}/host": {auth.WorkAsAgent, func() call {
			return call{path: "/api/v1/agent/assignments/a-none/host", body: map[string]any{"session": "s-none", "op": "checkpoint"}, ok: 409}
		}},
		"POST /api/v1/agent/assignments/{id}/result": {auth.WorkAsAgent, func() call {
			return call{path: "/api/v1/agent/assignments/a-none/result", body: map[string]any{"session": "s-none"}, ok: 409}
		}},
		"GET /api/v1/runs/page":                   {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/page"} }},
		"GET /api/v1/runs/{id}/definition":        {auth.ReadRuns, func() call { return call{path: "/api/v1/runs/" + e.cancelledRun() + "/definition"} }},
		"GET /api/v1/playbooks/{name}/definition": {auth.ReadPlaybooks, func() call { return call{path: "/api/v1/playbooks/gate/definition"} }},
		"GET /api/v1/deliveries":                  {auth.ReadRuns, func() call { return call{path: "/api/v1/deliveries"} }},
		"GET /api/v1/schedules":                   {auth.ReadPlaybooks, func() call { return call{path: "/api/v1/schedules"} }},
		"GET /api/v1/notifications":               {auth.ReadRuns, func() call { return call{path: "/api/v1/notifications"} }},
		"GET /api/v1/state/backup":                {auth.Admin, func() call { return call{path: "/api/v1/state/backup"} }},
		"GET /api/v1/pauses":                      {auth.ReadRuns, func() call { return call{path: "/api/v1/pauses"} }},
		"POST /api/v1/pauses": {auth.PauseRuns, func() call {
			return call{path: "/api/v1/pauses", body: map[string]any{"pattern": fmt.Sprintf("frozen-%d", seq.Add(1)), "reason": "freeze"}}
		}},
		"DELETE /api/v1/pauses/{id}": {auth.PauseRuns, func() call {
			r := e.as("root", "POST", "/api/v1/pauses", map[string]any{"pattern": fmt.Sprintf("thawed-%d", seq.Add(1)), "reason": "freeze"})
			require.Equal(t, 201, r.status, "%s", r.body)
			var ans struct{ Pause struct{ ID string } }
			require.NoError(t, json.Unmarshal(r.body, &ans))
			return call{path: "/api/v1/pauses/" + ans.Pause.ID}
		}},
		"POST /api/v1/playbooks/{name}/schedules/pause": {auth.PauseSchedules, func() call {
			return call{path: "/api/v1/playbooks/yearly/schedules/pause", body: map[string]any{"reason": "freeze"}}
		}},
		"POST /api/v1/playbooks/{name}/schedules/resume": {auth.PauseSchedules, func() call {
			r := e.as("root", "POST", "/api/v1/playbooks/yearly/schedules/pause", map[string]any{"reason": "freeze"})
			require.Equal(t, 200, r.status, "%s", r.body)
			return call{path: "/api/v1/playbooks/yearly/schedules/resume", body: map[string]any{}}
		}},
		"POST /api/v1/playbooks/{name}/schedules/run": {auth.StartRuns, func() call {
			return call{path: "/api/v1/playbooks/yearly/schedules/run", body: map[string]any{}}
		}},
		"POST /api/v1/playbooks/{name}/schedules/backfill": {auth.StartRuns, func() call {
			return call{path: "/api/v1/playbooks/yearly/schedules/backfill", body: map[string]any{"from": "2020-01-01T00:00:00Z", "to": "2020-12-31T00:00:00Z", "dry_run": true}}
		}},
	}
	var names []string
	for p := range cases {
		names = append(names, p)
	}
	sort.Strings(names)
	require.Equal(t, server.APIRoutes(), names, "every API route has a case in the matrix")

	for _, pattern := range names {
		c := cases[pattern]
		method, _, _ := strings.Cut(pattern, " ")
		t.Run(pattern, func(t *testing.T) {
			for _, who := range []string{"vera", "otto", "alice", "root", "ada"} {
				allowed := c.perm == "" || slices.ContainsFunc(people[who].roles, func(role string) bool {
					return slices.Contains(auth.RolePermissions[role], c.perm)
				})
				cl := c.make()
				r := e.as(who, method, cl.path, cl.body)
				if allowed && cl.ok != 0 {
					assert.Equal(t, cl.ok, r.status, "%s (%v) %s %s: %s", who, people[who].roles, method, cl.path, r.body)
					continue
				}
				if allowed {
					assert.True(t, r.status/100 == 2, "%s (%v) %s %s: got %d, want 2xx: %s", who, people[who].roles, method, cl.path, r.status, r.body)
					continue
				}
				if assert.Equal(t, 403, r.status, "%s (%v) %s %s: %s", who, people[who].roles, method, cl.path, r.body) {
					body := r.json(t)
					assert.Equal(t, string(c.perm), body["permission"], "the 403 names the permission lacking")
					assert.Contains(t, body["error"], string(c.perm))
				}
			}
			cl := c.make()
			assert.Equal(t, 401, e.do(method, cl.path, "", cl.body).status, "anonymous")
			assert.Equal(t, 401, e.do(method, cl.path, "not-a-known-token", cl.body).status, "bad token")
		})
	}
}

// yearlyPlaybook has a schedule trigger that fires once a year.
const yearlyPlaybook = `version: 1
name: yearly
triggers:
  - schedule: {cron: "0 0 1 1 *"}
steps:
  - {id: say, uses: log, with: {message: hi}}
`

// A role limited to playbooks by pattern acts on those and no others:
// the others are 403 and left out of listings.
func TestScopedRole(t *testing.T) {
	nks := strings.Replace(approvalPlaybook, "name: gate", "name: nks-upgrade", 1)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "nks.yaml": nks}, withPeople)
	r := e.as("nksop", "POST", "/api/v1/playbooks/nks-upgrade/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	mine := r.json(t)["id"].(string)
	r = e.as("nksop", "POST", "/api/v1/playbooks/gate/runs", map[string]any{})
	assert.Equal(t, 403, r.status, "%s", r.body)
	assert.Equal(t, "runs.start", r.json(t)["permission"])
	other := e.newRun()
	assert.Equal(t, 403, e.as("nksop", "GET", "/api/v1/runs/"+other, nil).status)
	assert.Equal(t, 403, e.as("nksop", "POST", "/api/v1/runs/"+other+"/cancel", nil).status)
	assert.Equal(t, 200, e.as("nksop", "GET", "/api/v1/runs/"+mine, nil).status)
	runs := e.as("nksop", "GET", "/api/v1/runs", nil).json(t)["runs"].([]any)
	require.Len(t, runs, 1, "only the nks run is listed")
	assert.Equal(t, mine, runs[0].(map[string]any)["id"])
	pbs := e.as("nksop", "GET", "/api/v1/playbooks", nil).json(t)["playbooks"].([]any)
	require.Len(t, pbs, 1)
	assert.Equal(t, "nks-upgrade", pbs[0].(map[string]any)["name"])
	// A scoped admin-only permission is never given by a scoped grant.
	assert.Equal(t, 403, e.as("nksop", "POST", "/api/v1/reload", nil).status)
}

// A role limited by label (label:team=ml*) reaches the playbooks whose
// labels match, whatever their names.
func TestALabelScopedRole(t *testing.T) {
	ml := strings.Replace(approvalPlaybook, "name: gate", "name: tune\nlabels: {team: ml-platform}", 1)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "tune.yaml": ml}, withPeople)
	r := e.as("mlop", "POST", "/api/v1/playbooks/tune/runs", map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	mine := r.json(t)["id"].(string)
	r = e.as("mlop", "POST", "/api/v1/playbooks/gate/runs", map[string]any{})
	assert.Equal(t, 403, r.status, "a playbook without the label: %s", r.body)
	other := e.newRun()
	assert.Equal(t, 403, e.as("mlop", "POST", "/api/v1/runs/"+other+"/cancel", nil).status)
	assert.Equal(t, 200, e.as("mlop", "GET", "/api/v1/runs/"+mine, nil).status)
	runs := e.as("mlop", "GET", "/api/v1/runs", nil).json(t)["runs"].([]any)
	require.Len(t, runs, 1, "only the labelled playbook's run is listed")
	assert.Equal(t, mine, runs[0].(map[string]any)["id"])
}

// The server token keeps working, as admin, beside configured users.
func TestServerTokenIsAdmin(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withPeople)
	m := e.api("GET", "/api/v1/whoami", nil).json(t)
	assert.Equal(t, "server", m["kind"])
	assert.Equal(t, []any{"admin"}, m["roles"])
	assert.Equal(t, 201, e.api("POST", "/api/v1/tokens", map[string]any{"name": "ci", "roles": []string{"operator"}}).status)
}

// A token made through the API works at once, is stored only as its
// hash, and stops working when revoked; neither the token nor its hash
// is in an answer, the audit log, or (the token) the state file.
func TestTokenLifecycle(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withPeople)
	r := e.as("root", "POST", "/api/v1/tokens", map[string]any{"name": "ci", "roles": []string{"operator"}, "playbooks": []string{"ga*"}})
	require.Equal(t, 201, r.status, "%s", r.body)
	tok := r.json(t)["token"].(string)
	require.True(t, strings.HasPrefix(tok, auth.TokenPrefix))
	hash := auth.HashToken(tok)

	m := e.do("GET", "/api/v1/whoami", tok, nil).json(t)
	assert.Equal(t, "ci", m["name"])
	assert.Equal(t, "token", m["kind"])
	r = e.do("POST", "/api/v1/playbooks/gate/runs", tok, map[string]any{})
	require.Equal(t, 201, r.status, "%s", r.body)
	assert.Equal(t, 409, e.as("root", "POST", "/api/v1/tokens", map[string]any{"name": "ci", "roles": []string{"viewer"}}).status)
	assert.Equal(t, 400, e.as("root", "POST", "/api/v1/tokens", map[string]any{"name": "x", "roles": []string{"boss"}}).status)

	list := e.as("root", "GET", "/api/v1/tokens", nil)
	require.Equal(t, 200, list.status)
	assert.Contains(t, string(list.body), `"name":"ci"`)
	audit := e.as("root", "GET", "/api/v1/audit", nil)
	require.Equal(t, 200, audit.status)
	assert.Contains(t, string(audit.body), `"action":"token.create"`)
	assert.Contains(t, string(audit.body), `"identity":"ci"`, "the run started with the token is audited under its name")

	assert.Equal(t, 204, e.as("root", "DELETE", "/api/v1/tokens/ci", nil).status)
	assert.Equal(t, 401, e.do("GET", "/api/v1/whoami", tok, nil).status, "a revoked token is refused")
	assert.Equal(t, 404, e.as("root", "DELETE", "/api/v1/tokens/ci", nil).status)

	for _, b := range [][]byte{list.body, audit.body, e.as("root", "GET", "/api/v1/tokens", nil).body, e.as("root", "GET", "/api/v1/audit", nil).body} {
		assert.NotContains(t, string(b), tok)
		assert.NotContains(t, string(b), hash)
	}
	e.stop()
	data, err := os.ReadFile(e.state)
	require.NoError(t, err)
	assert.NotContains(t, string(data), tok, "the token is not in the state file")
	assert.Contains(t, string(data), hash, "its hash is")
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(e.state), "*"))
	for _, f := range matches {
		b, _ := os.ReadFile(f)
		assert.NotContains(t, string(b), tok, f)
	}
}

// A call refused before its route runs is audited with what it was about.
func TestARefusedCallIsAuditedWithItsTarget(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withPeople)
	id := e.newRun()
	require.Equal(t, 403, e.as("vera", "POST", "/api/v1/runs/"+id+"/cancel", nil).status)
	require.Equal(t, 403, e.as("vera", "POST", "/api/v1/playbooks/gate/runs", map[string]any{}).status)
	require.Equal(t, 403, e.as("otto", "DELETE", "/api/v1/tokens/ci", nil).status)
	body := string(e.as("root", "GET", "/api/v1/audit", nil).body)
	for _, want := range []string{
		`"identity":"vera","action":"run.cancel","target":"run:` + id + `","result":"denied"`,
		`"identity":"vera","action":"run.start","target":"playbook:gate","result":"denied"`,
		`"identity":"otto","action":"token.revoke","target":"token:ci","result":"denied"`,
	} {
		assert.Contains(t, body, want)
	}
}
