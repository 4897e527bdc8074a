package playtest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// branches returns a step's branches as "name=taken".
func branches(s *StepCover) []string {
	var out []string
	for _, b := range s.Branches {
		out = append(out, b.Name+"="+strings.Repeat("x", b.Taken))
	}
	return out
}

func TestCoverageCountsStepsAndBranchesOverCases(t *testing.T) {
	all := Coverage(runFile(t, "testdata/hello.test.yaml", ""))
	require.Len(t, all, 1)
	pc := all[0]
	assert.Equal(t, "hello", pc.Playbook)
	assert.Equal(t, 3, pc.Cases)
	assert.Equal(t, 4, pc.StepsTotal)
	assert.Equal(t, 4, pc.StepsRan)
	assert.Equal(t, 5, pc.BranchesTotal)
	assert.Equal(t, 5, pc.BranchesTaken)
	byID := map[string]*StepCover{}
	for _, s := range pc.Steps {
		byID[s.ID] = s
	}
	assert.Equal(t, 3, byID["greet"].Ran)
	assert.Equal(t, []string{"if true=x", "if false=xx"}, branches(byID["loud"]))
	assert.Equal(t, []string{"if true=x", "if false=xx", "failed and continued=x"}, branches(byID["check"]))
	assert.Equal(t, "finally", byID["bye"].List)

	one := Coverage(runFile(t, "testdata/hello.test.yaml", "greets the world"))[0]
	assert.Equal(t, 2, one.StepsRan, "greet and bye")
	assert.Equal(t, 2, one.BranchesTaken, "the two if false")
	var out bytes.Buffer
	WriteCoverage(&out, []*PlaybookCover{one})
	assert.Equal(t, `coverage: hello (testdata/hello.yaml): steps 2/4 (50%), branches 2/5 (40%), 1 cases
  greet        ran in 1 of 1 cases
  loud         NEVER RAN; IF TRUE: 0, if false: 1
  check        NEVER RAN; IF TRUE: 0, if false: 1, FAILED AND CONTINUED: 0
  finally.bye  ran in 1 of 1 cases
`, strings.ReplaceAll(out.String(), "\t", " "))
}

func TestReportsCarryEveryFailureWithItsPosition(t *testing.T) {
	p := testDir(t, "version: 1\nplaybook: hello.yaml\ncases:\n  - name: ok\n    expect: {status: succeeded}\n  - name: wrong\n    expect: {status: failed, runs: 2}\n")
	results := runFile(t, p, "")
	require.Len(t, results, 2)

	var text bytes.Buffer
	for _, r := range results {
		WriteCase(&text, r)
	}
	WriteSummary(&text, results, 0, 1500*time.Millisecond)
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	require.Len(t, lines, 5, text.String())
	assert.Regexp(t, `^--- PASS: t/ok \(\d+\.\d\ds\)$`, lines[0])
	assert.Regexp(t, `^--- FAIL: t/wrong \(\d+\.\d\ds\)$`, lines[1])
	assert.Equal(t, "    "+p+`:7:22: status: expected "failed", got "succeeded"`, lines[2])
	assert.Equal(t, "    "+p+`:7:36: runs: expected 2, got 1`, lines[3])
	assert.Equal(t, "FAIL\t1 passed, 1 failed\t(1.50s)", lines[4])

	var js bytes.Buffer
	require.NoError(t, NewReport(results, nil, time.Second).WriteJSON(&js))
	var rep Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &rep))
	assert.False(t, rep.Passed)
	assert.Equal(t, SummaryJSON{Cases: 2, Passed: 1, Failed: 1, DurationMS: 1000}, rep.Summary)
	require.Len(t, rep.Cases[1].Failures, 2)
	assert.Equal(t, DiagnosticJSON{File: p, Line: 7, Column: 22, Path: "status", Message: `expected "failed", got "succeeded"`}, rep.Cases[1].Failures[0])
	assert.Equal(t, "succeeded", rep.Cases[0].Runs[0].Status)

	var x bytes.Buffer
	require.NoError(t, WriteJUnit(&x, results, map[string]error{"broken.test.yaml": assert.AnError}, time.Second))
	var doc junitSuites
	require.NoError(t, xml.Unmarshal(x.Bytes(), &doc), x.String())
	assert.Equal(t, 3, doc.Tests)
	assert.Equal(t, 1, doc.Failures)
	assert.Equal(t, 1, doc.Errors)
	require.Len(t, doc.Suites, 2)
	assert.Equal(t, "t", doc.Suites[0].Cases[1].ClassName)
	require.NotNil(t, doc.Suites[0].Cases[1].Failure)
	assert.Equal(t, p+`:7:22: status: expected "failed", got "succeeded"`, doc.Suites[0].Cases[1].Failure.Message)
	assert.Contains(t, doc.Suites[0].Cases[1].Failure.Text, "runs: expected 2, got 1")
	assert.Equal(t, "broken.test.yaml", doc.Suites[1].Name)
}
