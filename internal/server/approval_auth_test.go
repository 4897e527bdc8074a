package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

const twoPersonPlaybook = `version: 1
name: twoperson
steps:
  - id: ok
    uses: approval
    with: {message: "go on?", required: 2, approvers: ["role:approver"]}
`

const timedPlaybook = `version: 1
name: timed
steps:
  - id: ok
    uses: approval
    with: {message: "go on?", timeout: 1s}
`

// startAs starts playbook as who and waits for its approval step.
func (e *env) startAs(who, playbook string) string {
	e.t.Helper()
	r := e.as(who, "POST", "/api/v1/playbooks/"+playbook+"/runs", map[string]any{})
	require.Equal(e.t, 201, r.status, "%s", r.body)
	id := r.json(e.t)["id"].(string)
	e.waitStep(id, "ok", state.StepWaiting)
	return id
}

func TestWhoStartedARunMayNotApproveIt(t *testing.T) {
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook}, withPeople)
	id := e.startAs("carol", "gate")
	r := e.as("carol", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true})
	assert.Equal(t, 403, r.status, "%s", r.body)
	assert.Contains(t, r.json(t)["error"], "started run")
	e.waitStep(id, "ok", state.StepWaiting) // still waiting
	r = e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "by": "carol"})
	assert.Equal(t, 403, r.status, "nobody answers on behalf of someone else: %s", r.body)
	r = e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true})
	require.Equal(t, 200, r.status, "%s", r.body)
	m := e.waitStatus(id, state.RunSucceeded)
	assert.Equal(t, "carol", m["trigger"].(map[string]any)["by"], "the run records who started it")

	audit := string(e.as("root", "GET", "/api/v1/audit", nil).body)
	assert.Regexp(t, `"identity":"carol","action":"run.approve","target":"run:`+id+`","result":"denied"`, audit)
	assert.Regexp(t, `"identity":"alice","action":"run.approve","target":"run:`+id+`","result":"ok"`, audit)
	assert.Regexp(t, `"identity":"carol","action":"run.start","target":"playbook:gate","result":"ok"`, audit)
}

func TestTwoPersonRuleWithApproversByRole(t *testing.T) {
	e := newEnv(t, map[string]string{"twoperson.yaml": twoPersonPlaybook}, withPeople)
	id := e.startAs("otto", "twoperson")
	// root may answer approvals, but is not in the role the step names.
	r := e.as("root", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true})
	assert.Equal(t, 403, r.status, "%s", r.body)
	require.Equal(t, 200, e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "comment": "lgtm"}).status)
	e.waitStep(id, "ok", state.StepWaiting) // one of two
	r = e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true})
	assert.Equal(t, 409, r.status, "the same approver twice counts once: %s", r.body)
	e.waitStep(id, "ok", state.StepWaiting)
	require.Equal(t, 200, e.as("bob", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true}).status)
	m := e.waitStatus(id, state.RunSucceeded)
	out := m["steps"].([]any)[0].(map[string]any)["outputs"].(map[string]any)
	assert.Equal(t, []any{"alice", "bob"}, out["approvers"])

	// A rejection by any allowed approver rejects.
	id = e.startAs("otto", "twoperson")
	require.Equal(t, 200, e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true}).status)
	require.Equal(t, 200, e.as("bob", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": false, "comment": "no"}).status)
	e.waitStatus(id, state.RunFailed)

	audit := string(e.as("root", "GET", "/api/v1/audit", nil).body)
	assert.Equal(t, 2, strings.Count(audit, `"identity":"bob","action":"run.approve"`))
	assert.Contains(t, audit, `"identity":"root","action":"run.approve","target":"run:`)
}

func TestAnUnansweredApprovalTimesOutRejected(t *testing.T) {
	e := newEnv(t, map[string]string{"timed.yaml": timedPlaybook}, withPeople)
	id := e.startAs("otto", "timed")
	m := e.waitStatus(id, state.RunFailed)
	assert.Equal(t, "timeout", m["error"].(map[string]any)["code"], "%v", m)
	r := e.as("alice", "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true})
	assert.Equal(t, 409, r.status, "too late: %s", r.body)
	audit := string(e.as("root", "GET", "/api/v1/audit", nil).body)
	assert.Contains(t, audit, `"identity":"system:timeout","action":"run.approve","target":"run:`+id+`","result":"timeout"`,
		"the clock's answer is in the audit log too")
}
