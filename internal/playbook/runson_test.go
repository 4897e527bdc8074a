package playbook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunsOnPlacesStepsAndThePlaybookGivesTheDefault(t *testing.T) {
	pb, err := Parse("p.yaml", []byte(`version: 1
name: p
runs_on: {labels: {role: bastion}}
on_agent_lost: retry
secrets:
  token: {agent: DEPLOY_TOKEN}
steps:
  - {id: a, uses: log, with: {message: hi}}
  - {id: b, uses: log, with: {message: hi}, runs_on: {labels: {role: web, zone: a}}}
  - {id: c, uses: log, with: {message: hi}, on_agent_lost: fail}
  - {id: d, uses: approval, with: {message: ok?}}
`), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, &RunsOn{Labels: map[string]string{"role": "bastion"}, OnAgentLost: "retry"}, pb.Steps[0].RunsOn)
	assert.Equal(t, &RunsOn{Labels: map[string]string{"role": "web", "zone": "a"}, OnAgentLost: "fail"}, pb.Steps[1].RunsOn)
	assert.Equal(t, &RunsOn{Labels: map[string]string{"role": "bastion"}, OnAgentLost: "fail"}, pb.Steps[2].RunsOn, "the step's policy, the playbook's labels")
	assert.Nil(t, pb.Steps[3].RunsOn, "an approval stays on the server")
	assert.Equal(t, "role=web,zone=a", pb.Steps[1].RunsOn.String())
	assert.Equal(t, map[string]string{"token": "DEPLOY_TOKEN"}, pb.AgentSecrets)
}

func TestRunsOnProblemsHaveTheirPositions(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`version: 1
name: p
secrets:
  token: {agent: "not a name"}
steps:
  - {id: a, uses: log, with: {message: hi}, runs_on: {labels: {}}}
  - {id: b, uses: log, with: {message: hi}, runs_on: {labels: {Role: x}}, on_agent_lost: later}
  - {id: c, uses: approval, with: {message: ok?}, runs_on: {labels: {a: b}}}
  - {id: d, uses: log, with: {message: hi}, on_agent_lost: retry}
  - {id: e, uses: log, with: {message: hi}, runs_on: {role: x}}
`), LoadOptions{})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`p.yaml:4:18: secrets.token.agent: invalid variable name "not a name"`,
		`p.yaml:6:63: steps[0].runs_on.labels: must name at least one label`,
		`p.yaml:7:64: steps[1].runs_on.labels.Role: invalid label name "Role"`,
		`p.yaml:7:90: steps[1].on_agent_lost: must be one of fail, retry (got "later")`,
		`p.yaml:8:51: steps[2]: approval steps run in the server's process: they cannot run on an agent`,
		`p.yaml:9:45: steps[3].on_agent_lost: on_agent_lost applies to steps that run on an agent`,
		`p.yaml:10:54: steps[4].runs_on: labels is required`,
		`p.yaml:10:55: steps[4].runs_on.role: unknown key "role"`,
	} {
		assert.Contains(t, msg, want)
	}
}
