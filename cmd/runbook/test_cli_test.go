package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShippedPlaybookTestsPass runs `runbook test` over playbooks/, as a
// user or CI would: every shipped playbook's tests pass, a line per case,
// and go test ./... runs them.
func TestShippedPlaybookTestsPass(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir, err := filepath.Abs("../../playbooks")
	require.NoError(t, err)
	r := c.run("test", dir)
	require.Equal(t, 0, r.code, r)
	for _, pb := range []string{"nks-maintenance-upgrade", "notice-digest", "ml-tune-and-deploy", "sms-unsubscribe"} {
		assert.Regexp(t, `(?m)^--- PASS: `+pb+`/`, r.stdout, "each shipped playbook has tests")
	}
	assert.NotContains(t, r.stdout, "--- FAIL")
	assert.Regexp(t, `(?m)^ok\t\d+ passed, 0 failed\t\(\d+\.\d+s\)$`, r.stdout)
	// The shell step wrote into the isolated home, not the user's.
	_, err = os.Stat(filepath.Join(c.dir, ".local", "state", "runbook", "sms-suppression.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "runbook test keeps playbooks away from the user's own files")
}

const cliBook = `version: 1
name: greet
inputs:
  who: {type: string, default: world}
steps:
  - id: greet
    uses: set
    with:
      greeting: hello, ${{ inputs.who }}
`

// A wrong expectation fails the case (exit 1) and says where it is.
func TestTestFailsAtTheWrongExpectation(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.file("greet.yaml", cliBook)
	c.file("greet.test.yaml", `version: 1
playbook: greet.yaml
cases:
  - name: greets the team
    inputs: {who: team}
    expect:
      steps:
        greet: {outputs: {greeting: "hello, team"}}
  - name: says hi
    expect:
      steps:
        greet: {outputs: {greeting: hi}}
`)
	r := c.run("test", ".")
	require.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout, "--- PASS: greet/greets the team (")
	assert.Contains(t, r.stdout, "--- FAIL: greet/says hi (")
	assert.Contains(t, r.stdout, "    greet.test.yaml:12:37: steps.greet.outputs.greeting: expected \"hi\", got \"hello, world\"\n")
	assert.Regexp(t, `(?m)^FAIL\t1 passed, 1 failed\t`, r.stdout)

	// --run picks cases by FILE/CASE.
	r = c.run("test", "--run", "greet/greets")
	require.Equal(t, 0, r.code, r)
	assert.NotContains(t, r.stdout, "says hi")
	r = c.run("test", "--run", "nothing-matches")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "matches no case")
}

// An invalid test file is reported like `validate` reports a playbook
// (exit 2); the valid files still run.
func TestAnInvalidTestFileExitsTwoWithDiagnostics(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.file("greet.yaml", cliBook)
	c.file("bad.test.yaml", "version: 1\nplaybook: greet.yaml\ncases:\n  - name: a\n    expect:\n      steps: {gret: succeeded}\n")
	c.file("good.test.yaml", "version: 1\nplaybook: greet.yaml\ncases:\n  - name: b\n    expect: {status: succeeded}\n")
	r := c.run("test")
	require.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `bad.test.yaml:6:15: cases[0].expect.steps.gret: playbook greet has no step "gret"; did you mean "greet"?`)
	assert.Contains(t, r.stdout, "--- PASS: good/b")
	assert.Contains(t, r.stdout, "1 invalid test files")

	r = c.run("test", "nowhere")
	assert.Equal(t, 2, r.code, r)
	empty := t.TempDir()
	r = c.run("test", empty)
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "no test files")
}

// --output json, --junit and --cover give CI what it reads.
func TestTestReportsForCI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.file("greet.yaml", cliBook)
	c.file("greet.test.yaml", `version: 1
playbook: greet.yaml
cases:
  - name: passes
    expect: {status: succeeded}
  - name: fails
    expect: {status: failed}
`)
	r := c.run("test", "--output", "json", "--junit", "report.xml", "--cover")
	require.Equal(t, 1, r.code, r)
	var rep struct {
		Passed bool
		Cases  []struct {
			Name     string
			Passed   bool
			Failures []struct {
				File         string
				Line, Column int
				Path         string
				Message      string
			}
		}
		Summary  struct{ Cases, Passed, Failed int }
		Coverage []struct {
			Playbook   string
			StepsRan   int `json:"steps_ran"`
			StepsTotal int `json:"steps_total"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.False(t, rep.Passed)
	assert.Equal(t, 2, rep.Summary.Cases)
	assert.Equal(t, 1, rep.Summary.Failed)
	require.Len(t, rep.Cases, 2)
	assert.Equal(t, "greet/fails", rep.Cases[1].Name)
	require.Len(t, rep.Cases[1].Failures, 1)
	f := rep.Cases[1].Failures[0]
	assert.Equal(t, 7, f.Line)
	assert.Equal(t, 22, f.Column)
	assert.Equal(t, "status", f.Path)
	assert.Equal(t, `expected "failed", got "succeeded"`, f.Message)
	require.Len(t, rep.Coverage, 1)
	assert.Equal(t, "greet", rep.Coverage[0].Playbook)
	assert.Equal(t, 1, rep.Coverage[0].StepsRan)
	assert.Equal(t, 1, rep.Coverage[0].StepsTotal)

	raw, err := os.ReadFile(filepath.Join(c.dir, "report.xml"))
	require.NoError(t, err)
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(raw, &junit), string(raw))
	assert.Equal(t, 2, junit.Tests)
	assert.Equal(t, 1, junit.Failures)
	require.Len(t, junit.Suites, 1)
	require.Len(t, junit.Suites[0].Cases, 2)
	assert.Nil(t, junit.Suites[0].Cases[0].Failure)
	require.NotNil(t, junit.Suites[0].Cases[1].Failure)
	assert.Contains(t, junit.Suites[0].Cases[1].Failure.Message, "greet.test.yaml:7:22: status: expected")

	r = c.run("test", "--cover", "--run", "passes")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, regexp.MustCompile(`(?m)^coverage: greet \(.*greet.yaml\): steps 1/1 \(100%\), branches 0/0 \(-\), 1 cases$`), r.stdout)
}

// TestCoverCountsForEachSteps: a for_each step whose items ran is
// covered, and an item that failed and was let through takes its step's
// branch.
func TestCoverCountsForEachSteps(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.file("each.yaml", `version: 1
name: each
steps:
  - id: greet
    for_each: [a, b]
    uses: log
    with: {message: "hi ${{ item }}"}
  - id: flaky
    for_each: [x]
    continue_on_error: true
    uses: fail
    with: {message: no}
`)
	c.file("each.test.yaml", `version: 1
playbook: each.yaml
cases:
  - name: greets both
    expect: {status: succeeded}
`)
	r := c.run("test", "--cover")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, regexp.MustCompile(`(?m)^coverage: each \(.*each.yaml\): steps 2/2 \(100%\), branches 1/1 \(100%\), 1 cases$`), r.stdout)
	assert.Regexp(t, `(?m)^  greet +ran in 1 of 1 cases$`, r.stdout)
	assert.Regexp(t, `(?m)^  flaky +ran in 1 of 1 cases; failed and continued: 1$`, r.stdout)
	assert.NotContains(t, r.stdout, "NEVER RAN")
}

// TestAGlobInAFaultPathIsRefusedWhereItIs: a fault's path is a prefix;
// a `*` in it (which expectations' call paths accept) would load and
// never match, so the test file is refused at the `*`.
func TestAGlobInAFaultPathIsRefusedWhereItIs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.file("greet.yaml", cliBook)
	c.file("greet.test.yaml", `version: 1
playbook: greet.yaml
cases:
  - name: faulty
    faults:
      - http: {service: nks, path: "/v1/clusters/*/nodegroups", status: 500}
    expect: {status: succeeded}
`)
	r := c.run("test")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `greet.test.yaml:6:50: cases[0].faults[0].http.path: a fault's path is a prefix, not a pattern: "/v1/clusters/*/nodegroups" would match no call (write "/v1/clusters/": every path that starts with it)`)
}

// The schema `runbook test --schema` prints is the one in schema/.
func TestTestSchemaIsTheCommittedOne(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("test", "--schema")
	require.Equal(t, 0, r.code, r)
	want, err := os.ReadFile("../../schema/playbook-test.schema.json")
	require.NoError(t, err)
	assert.Equal(t, string(want), r.stdout)
	assert.True(t, strings.HasSuffix(r.stdout, "\n"))
}
