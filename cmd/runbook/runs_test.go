package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunsListShowAndLogsAfterARun(t *testing.T) {
	c := newCLI(t)
	r := c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, "no runs\n", r.stdout, "nothing has run: no state file needed")

	ok := runIDOf(t, c.run("run", c.file("hello.yaml", helloPlaybook)).stdout)
	bad := runIDOf(t, c.run("run", c.file("breaks.yaml", failingPlaybook)).stdout)

	r = c.run("runs", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `^RUN\s+PLAYBOOK\s+STATUS\s+STARTED\s+DURATION\s+ERROR\n`, r.stdout)
	assert.Regexp(t, `(?m)^`+ok+`\s+hello\s+succeeded\s`, r.stdout)
	assert.Regexp(t, `(?m)^`+bad+`\s+breaks\s+failed\s.*step boom: it broke on purpose`, r.stdout)

	r = c.run("runs", "list", "--limit", "1")
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, 2, strings.Count(r.stdout, "\n"), "the header and one run:\n%s", r.stdout)
	assert.Equal(t, "showing the newest 1 run; more match (--limit 0 for all)\n", r.stderr, "a list cut short says so")
	r = c.run("runs", "list", "--limit", "2")
	require.Equal(t, 0, r.code, r)
	assert.Empty(t, r.stderr, "every run shown: nothing more to say")

	r = c.run("runs", "list", "--status", "failed", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var runs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &runs))
	require.Len(t, runs, 1)
	assert.Equal(t, bad, runs[0]["id"])

	r = c.run("runs", "show", bad)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "status:    failed")
	assert.Regexp(t, `(?m)^first\s+succeeded\s+1\s+\d+\.\d\ds\s*$`, r.stdout)
	assert.Regexp(t, `(?m)^boom\s+failed\s+1\s+\S+\s+it broke on purpose$`, r.stdout)
	assert.Regexp(t, `(?m)^never\s+skipped\s+0\s`, r.stdout)

	r = c.run("runs", "show", ok, "--output", "json")
	require.Equal(t, 0, r.code, r)
	var doc runDocument
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, "shell-says-hi", doc.Steps[1].Outputs["stdout"])

	r = c.run("runs", "logs", ok)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "step greet started (attempt 1)")
	assert.Contains(t, r.stdout, "greet: hello world times=1")
	assert.Contains(t, r.stdout, "run succeeded")

	r = c.run("runs", "logs", ok, "--output", "json")
	require.Equal(t, 0, r.code, r)
	var evs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &evs))
	assert.Equal(t, "run.created", evs[0]["type"])

	r = c.run("runs", "show", "20200101T000000-000000")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, `no run "20200101T000000-000000"`)
	assert.Contains(t, r.stderr, "Try: runbook runs list")
}

const approvalPlaybook = `version: 1
name: gated
steps:
  - id: prepare
    uses: log
    with: {message: preparing}
  - id: gate
    uses: approval
    with:
      message: ship it?
      fields: {ticket: {type: integer, required: true}}
  - id: ship
    uses: log
    with: {message: "shipping ticket ${{ steps.gate.outputs.fields.ticket }} for ${{ steps.gate.outputs.by }}"}
`

func TestApprovalParksTheRunAndApproveFinishesIt(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	r := c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	assert.Contains(t, r.stdout, "run "+id+" is waiting for approval of step gate; answer with: runbook runs approve "+id+" gate --field ticket=INTEGER\n",
		"the hint names the field the approval requires")
	assert.Contains(t, r.stdout, "step gate: waiting for approval: ship it? (answer with: runbook runs approve "+id+" gate --field ticket=INTEGER)\n",
		"so does the line of the approval's request")
	assert.NotContains(t, r.stdout, "shipping")

	r = c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "answer with: runbook runs approve "+id+" gate --field ticket=INTEGER\n")
	assert.Contains(t, r.stdout, "status:    waiting")
	assert.Regexp(t, `(?m)^gate\s+waiting\s`, r.stdout)

	r = c.run("runs", "approve", id, "gate", "--by", "alice", "--field", "ticket=42", "--comment", "go")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "step gate approved by alice")
	assert.Contains(t, r.stdout, "ship: shipping ticket 42 for alice")
	assert.Contains(t, r.stdout, "run "+id+" succeeded in")

	r = c.run("runs", "approve", id, "gate")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "not waiting for approval")
}

func TestAnApprovalThatDoesNotFitIsRefusedAndTheRunKeepsWaiting(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	id := runIDOf(t, c.run("run", pb).stdout)

	r := c.run("runs", "approve", id, "gate")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "answer to step gate of run "+id+" refused, the run keeps waiting: field ticket is required")

	r = c.run("runs", "approve", id, "gate", "--field", "tiket=42", "--field", "note=x")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `field ticket is required; unknown field "note"; unknown field "tiket"; did you mean "ticket"?`)
	assert.NotContains(t, r.stdout, "shipping")

	r = c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "status:    waiting")
	assert.Regexp(t, `(?m)^gate\s+waiting\s`, r.stdout)

	r = c.run("runs", "approve", id, "gate", "--field", "ticket=42")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "ship: shipping ticket 42 for tester", "the approver defaults to $USER")
}

func TestARejectedApprovalFailsTheRun(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	id := runIDOf(t, c.run("run", pb).stdout)
	r := c.run("runs", "approve", id, "gate", "--reject", "--comment", "not today", "--output", "json")
	assert.Equal(t, 1, r.code, r)
	var doc runDocument
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.EqualValues(t, "failed", doc.Run.Status)
	assert.Contains(t, doc.Run.Error.Message, "rejected by tester: not today")
}

func TestApproveWithoutResumeThenResumeTheRun(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	id := runIDOf(t, c.run("run", pb).stdout)
	r := c.run("runs", "approve", "--no-resume", id, "gate", "--field", "ticket=7")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "continue with: runbook run --resume "+id)
	r = c.run("runs", "show", id)
	assert.Contains(t, r.stdout, "status:    waiting")

	r = c.run("run", "--resume", id)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "ship: shipping ticket 7 for tester")
	assert.NotContains(t, r.stdout, "prepare:", "finished steps do not run again")
	assert.Contains(t, r.stdout, "run "+id+" succeeded")

	r = c.run("run", "--resume", id)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "already succeeded")
}

func TestCancelAParkedRun(t *testing.T) {
	c := newCLI(t)
	pb := c.file("gated.yaml", approvalPlaybook)
	id := runIDOf(t, c.run("run", pb).stdout)
	r := c.run("runs", "cancel", id)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, "run "+id+" cancelled\n", r.stdout)

	r = c.run("runs", "show", id, "--output", "json")
	var doc runDocument
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.EqualValues(t, "cancelled", doc.Run.Status)

	r = c.run("runs", "logs", id)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(r.stdout), "run cancelled by tester"), r.stdout)

	r = c.run("runs", "cancel", id)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "already cancelled")
}

// A parked run of a `runbook run` that exited is cancelled as its holder
// would cancel it: `runs cancel` executes it cancelled, so its finally
// step runs (once) and its concurrency key is released for the next run.
func TestCancelAParkedRunRunsItsFinallyAndFreesItsKey(t *testing.T) {
	c := newCLI(t)
	pb := c.file("keyed.yaml", `version: 1
name: keyed
concurrency: {key: only-one}
steps:
  - {id: gate, uses: approval, with: {message: go on?}}
  - {id: after, uses: shell, with: {command: "echo after >> after.txt"}}
finally:
  - {id: tidy, uses: shell, with: {command: "echo tidy >> finally.txt"}}
`)
	id := runIDOf(t, c.run("run", pb).stdout)
	r := c.run("runs", "cancel", id)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, "run "+id+" cancelled\n", r.stdout)
	b, err := os.ReadFile(filepath.Join(c.dir, "finally.txt"))
	require.NoError(t, err, "the finally step ran")
	assert.Equal(t, "tidy\n", string(b))
	_, err = os.Stat(filepath.Join(c.dir, "after.txt"))
	assert.True(t, os.IsNotExist(err), "no step after the cancelled one")

	r = c.run("runs", "show", id, "--output", "json")
	var doc runDocument
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.EqualValues(t, "cancelled", doc.Run.Status)

	next := runIDOf(t, c.run("run", pb).stdout)
	r = c.run("runs", "show", next)
	assert.Contains(t, r.stdout, "status:    waiting", "the next run took the key: %s", r.stdout)
	assert.NotContains(t, r.stdout, "queued", r.stdout)
}

func TestApprovalInsideASubPlaybook(t *testing.T) {
	c := newCLI(t)
	c.file("child.yaml", `version: 1
name: child
steps:
  - id: ask
    uses: approval
    with: {message: child asks}
  - id: after
    uses: log
    with: {message: child continues}
`)
	pb := c.file("parent.yaml", `version: 1
name: parent
steps:
  - id: sub
    uses: playbook
    with: {path: child.yaml}
  - id: end
    uses: log
    with: {message: parent ends}
`)
	r := c.run("run", pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	assert.Contains(t, r.stdout, "waiting for approval of step ask; answer with: runbook runs approve "+id+".sub ask")

	r = c.run("runs", "approve", id+".sub", "ask")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "sub/after: child continues")
	assert.Contains(t, r.stdout, "end: parent ends")
	assert.Contains(t, r.stdout, "run "+id+" succeeded")
}
