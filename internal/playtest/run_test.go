package playtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runFile loads a test file and runs its cases (those filter selects).
func runFile(t *testing.T, path, filter string) []*Result {
	t.Helper()
	f, err := Load(path)
	require.NoError(t, err)
	var re *regexp.Regexp
	if filter != "" {
		re = regexp.MustCompile(filter)
	}
	jobs := Selected([]*File{f}, re)
	require.NotEmpty(t, jobs, "the filter selects cases")
	return RunAll(context.Background(), jobs, 0, Options{Dir: t.TempDir()}, nil)
}

// failures lists a result's failures without the file name.
func failures(r *Result) []string {
	var out []string
	for _, f := range r.Failures {
		out = append(out, strings.TrimPrefix(f.String(), f.Pos.File+":"))
	}
	return out
}

func TestTheExampleCasesPass(t *testing.T) {
	for _, r := range runFile(t, "testdata/hello.test.yaml", "") {
		assert.True(t, r.Passed, "%s: %v", r.Name(), failures(r))
		require.Len(t, r.Runs, 1)
		assert.NotEmpty(t, r.Runs[0].ID)
	}
}

// Expectations that do not hold fail the case, each with expected and
// actual and the position of the expectation.
func TestWrongExpectationsFailAtTheirPositions(t *testing.T) {
	p := testDir(t, `version: 1
playbook: hello.yaml
cases:
  - name: wrong about everything
    inputs: {who: team}
    expect:
      status: failed
      outputs: {greeting: "hello, world"}
      steps:
        greet: {attempts: 2, outputs: {greeting: '${{ result.greeting == "hi" }}'}}
        loud: succeeded
        check: {status: skipped, error: boom}
      runs: 2
      calls:
        - {service: nks, method: POST, path: /v1/clusters}
      no_calls:
        - {service: sink}
      files:
        out.txt: {exists: true}
      that:
        - ${{ inputs.who == "world" }}
`)
	res := runFile(t, p, "")
	require.Len(t, res, 1)
	r := res[0]
	assert.False(t, r.Passed)
	assert.Equal(t, []string{
		`7:15: status: expected "failed", got "succeeded"`,
		`8:27: outputs.greeting: expected "hello, world", got "hello, team"`,
		`10:27: steps.greet.attempts: expected 2, got 1`,
		`10:50: steps.greet.outputs.greeting: ${{ result.greeting == "hi" }} is false for "hello, team"`,
		`11:15: steps.loud.status: expected "succeeded", got "skipped"`,
		`12:41: steps.check.error: expected an error, got none`,
		`13:13: runs: expected 2, got 1`,
		`15:11: calls[0]: expected a call POST nks /v1/clusters, got none; no calls to nks`,
		`19:27: files["out.txt"].exists: expected true, got false`,
		`21:11: that[0]: ${{ inputs.who == "world" }} is false, expected true`,
	}, failures(r))
}

// A changed playbook fails the shipped tests that describe its behaviour:
// the tests catch a wrong playbook, each at the expectation it breaks.
func TestTheShippedTestsCatchAWrongPlaybook(t *testing.T) {
	for _, tc := range []struct {
		name, playbook, test, filter string
		from, to                     string
		want                         string
	}{
		{
			name: "the report no longer runs after a failed upgrade", playbook: "nks-maintenance-upgrade.yaml",
			test: "nks-maintenance-upgrade.test.yaml", filter: "worker group whose upgrade fails",
			from: "  - id: report\n    if: ${{ always() }}\n", to: "  - id: report\n",
			want: `runs[0].steps.report.status: expected "succeeded", got "skipped"`,
		},
		{
			name: "the upgrade forgets the worker groups", playbook: "nks-maintenance-upgrade.yaml",
			test: "nks-maintenance-upgrade.test.yaml", filter: "control plane first",
			from: "      node_groups: ${{ inputs.node_groups }}\n", to: "      node_groups: [default-master]\n",
			want: `steps.upgrade.outputs.upgraded: expected ["default-master","default-worker","gpu-pool"], got ["default-master"]`,
		},
		{
			name: "the digest looks back a month", playbook: "notice-digest.yaml",
			test: "notice-digest.test.yaml", filter: "last three days",
			from: "first_run: since:3d", to: "first_run: since:30d",
			want: `steps.digest.outputs.count: expected 2, got 3`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, err := os.ReadFile(filepath.Join("../../playbooks", tc.playbook))
			require.NoError(t, err)
			require.Contains(t, string(src), tc.from, "the mutation applies")
			changed := strings.Replace(string(src), tc.from, tc.to, 1)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.playbook), []byte(changed), 0o600))
			test, err := os.ReadFile(filepath.Join("../../playbooks/tests", tc.test))
			require.NoError(t, err)
			require.NoError(t, os.Mkdir(filepath.Join(dir, "tests"), 0o700))
			p := filepath.Join(dir, "tests", tc.test)
			require.NoError(t, os.WriteFile(p, test, 0o600))

			res := runFile(t, p, tc.filter)
			require.Len(t, res, 1)
			assert.False(t, res[0].Passed)
			var msgs []string
			for _, f := range res[0].Failures {
				msgs = append(msgs, f.Path+": "+f.Message)
				assert.Equal(t, p, f.Pos.File)
				assert.Positive(t, f.Pos.Line)
			}
			assert.Contains(t, msgs, tc.want)
		})
	}
}

// A world the simulators could not have reached is refused at the entry
// that declares it, and the case does not run.
func TestAnImpossibleWorldFailsTheCaseAtItsEntry(t *testing.T) {
	p := testDir(t, `version: 1
playbook: hello.yaml
cases:
  - name: a worker ahead of the control plane
    world:
      nks:
        clusters:
          - name: prod
            version: v1.29.3
            node_groups: [{name: gpu, version: v1.31.4}]
          - name: staging
          - name: staging
    expect: {status: succeeded}
`)
	res := runFile(t, p, "")
	require.Len(t, res, 1)
	assert.Equal(t, []string{
		`8:13: seed cluster "prod": node group gpu at v1.31.4 would be newer than the control plane (v1.29.3)`,
		`12:13: seed cluster "staging": a cluster with that name exists`,
	}, failures(res[0]))
	assert.Empty(t, res[0].Runs, "nothing ran")
}

const gatedBook = `version: 1
name: gated
steps:
  - id: approve
    uses: approval
    with:
      message: go?
      fields:
        ticket: {type: string, required: true}
  - id: go
    uses: log
    with: {message: "going for ${{ steps.approve.outputs.fields.ticket }}"}
`

// A run parks on an approval; the case answers it, or leaves it waiting;
// an answer the step refuses is the case's failure, at the answer.
func TestApprovalsAreAnsweredOrLeftWaiting(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gated.yaml"), []byte(gatedBook), 0o600))
	p := filepath.Join(dir, "gated.test.yaml")
	require.NoError(t, os.WriteFile(p, []byte(`version: 1
playbook: gated.yaml
cases:
  - name: answered
    approvals: [{step: approve, by: alice, fields: {ticket: CHG-1}}]
    expect:
      status: succeeded
      steps: {approve: {outputs: {by: alice}}, go: succeeded}
  - name: unanswered
    expect:
      status: waiting
      steps: {approve: waiting, go: not_run}
  - name: answered without the ticket
    approvals: [{step: approve, by: alice}]
    expect: {status: waiting}
`), 0o600))
	res := runFile(t, p, "")
	require.Len(t, res, 3)
	assert.True(t, res[0].Passed, failures(res[0]))
	assert.True(t, res[1].Passed, failures(res[1]))
	got := failures(res[2])
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "14:17: approvals: the answer was refused: answer to step approve of run ")
}

// A case's webhook deliveries are committed as runbook serve commits
// them: the delivery's claims, its runs and its body in one transaction
// (the intake's Preparer path), each run referring to the body stored
// once instead of carrying the payload in its trigger.
func TestWebhookCasesCommitTheDeliveryAsServeDoes(t *testing.T) {
	results := runFile(t, "../../playbooks/tests/sms-unsubscribe.test.yaml", "an unsubscribe adds the number|a redelivered webhook starts no second run")
	require.Len(t, results, 2)
	for _, r := range results { // (whether they pass: TestShippedPlaybookTestsPass, with runbook test's environment)
		require.Len(t, r.Runs, 1, r.Name())
		run := r.Runs[0].Run
		require.NotNil(t, run, r.Name())
		require.NotNil(t, run.Delivery, "%s: the run refers to its delivery's stored body", r.Name())
		assert.NotEmpty(t, run.Delivery.ID)
		assert.NotContains(t, run.Trigger, "payload", "the payload is stored once, with the delivery")
	}
}
