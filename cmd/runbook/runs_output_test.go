package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
)

const printingPlaybook = `version: 1
name: printing
steps:
  - id: build
    uses: shell
    with:
      command: 'echo compiling; echo "warning: slow" >&2; echo "token is $T"'
      env: {T: "${{ secrets.DEPLOY_TOKEN }}"}
  - id: each
    for_each: [a, b]
    uses: shell
    with: {command: "echo item ${{ item }}"}
`

func lineIndex(t *testing.T, out, line string) int {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if strings.Contains(l, line) {
			return i
		}
	}
	t.Fatalf("no line with %q in:\n%s", line, out)
	return -1
}

func TestRunShowsWhatAShellStepPrintsUnderItsStep(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = append(c.env, "RUNBOOK_SECRET_DEPLOY_TOKEN=tok-very-secret-42")
	r := c.run("run", c.file("printing.yaml", printingPlaybook))
	require.Equal(t, 0, r.code, r)
	started := lineIndex(t, r.stdout, "step build started (attempt 1)")
	compiling := lineIndex(t, r.stdout, "  build | compiling")
	token := lineIndex(t, r.stdout, "  build | token is ***")
	lineIndex(t, r.stdout, "  build ! warning: slow")
	done := lineIndex(t, r.stdout, "step build succeeded in")
	assert.Less(t, started, compiling)
	assert.Less(t, compiling, token)
	assert.Less(t, token, done)
	lineIndex(t, r.stdout, "  each[0] | item a")
	lineIndex(t, r.stdout, "  each[1] | item b")
	assert.NotContains(t, r.stdout+r.stderr, "tok-very-secret-42")
	id := runIDOf(t, r.stdout)

	t.Run("runs logs RUN STEP prints what the step printed, as printed", func(t *testing.T) {
		r := c.run("runs", "logs", id, "build")
		require.Equal(t, 0, r.code, r)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		assert.ElementsMatch(t, []string{"compiling", "warning: slow", "token is ***"}, lines)
		assert.Less(t, lineIndex(t, r.stdout, "compiling"), lineIndex(t, r.stdout, "token is ***"))
	})
	t.Run("runs logs RUN STEP of a for_each step prints its items' lines", func(t *testing.T) {
		r := c.run("runs", "logs", id, "each")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "item a\nitem b\n", r.stdout)
	})
	t.Run("runs logs RUN STEP --output json gives the lines with their streams", func(t *testing.T) {
		r := c.run("runs", "logs", id, "build", "--output", "json")
		require.Equal(t, 0, r.code, r)
		var lines []state.OutputLine
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &lines), r.stdout)
		require.Len(t, lines, 3)
		streams := map[string]string{}
		for _, l := range lines {
			streams[l.Text] = l.Stream
			assert.Equal(t, "build", l.Step)
		}
		assert.Equal(t, map[string]string{"compiling": "stdout", "warning: slow": "stderr", "token is ***": "stdout"}, streams)
	})
	t.Run("runs logs RUN interleaves the lines with the events", func(t *testing.T) {
		r := c.run("runs", "logs", id)
		require.Equal(t, 0, r.code, r)
		assert.Less(t, lineIndex(t, r.stdout, "step build started (attempt 1)"), lineIndex(t, r.stdout, "  build | compiling"))
		assert.Less(t, lineIndex(t, r.stdout, "  build | token is ***"), lineIndex(t, r.stdout, "step build succeeded in"))
		assert.NotContains(t, r.stdout, "tok-very-secret-42")
	})
	t.Run("the state file never holds the secret the step printed", func(t *testing.T) {
		raw, err := os.ReadFile(c.state)
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "tok-very-secret-42")
	})
}

// outBuffer is a bytes.Buffer a process writes while the test reads it.
type outBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *outBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *outBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunsLogsFollowsAStepsOutputThroughTheServer(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	marker := filepath.Join(c.dir, "go-on")
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/talk.yaml", `version: 1
name: talk
steps:
  - id: talk
    uses: shell
    with: {command: 'echo first; while [ ! -e `+marker+` ]; do sleep 0.05; done; echo second'}
`)
	s := c.serveRuns(t)
	code, run := s.api(t, "POST", "/api/v1/playbooks/talk/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)

	follow := exec.Command(bin, "runs", "logs", "-f", id, "talk")
	follow.Dir, follow.Env = c.dir, c.env
	var out, errb outBuffer
	follow.Stdout, follow.Stderr = &out, &errb
	require.NoError(t, follow.Start())
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	t.Cleanup(func() { _ = follow.Process.Kill() })

	deadline := time.Now().Add(10 * time.Second)
	for out.String() != "first\n" {
		require.True(t, time.Now().Before(deadline), "runs logs -f did not print the first line while the step runs: %q %q", out.String(), errb.String())
		time.Sleep(20 * time.Millisecond)
	}
	r := c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"status": "running"`, "the line came while the step ran")
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	select {
	case err := <-done:
		require.NoError(t, err, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("runs logs -f did not return when the run ended: %q", out.String())
	}
	assert.Equal(t, "first\nsecond\n", out.String())

	t.Run("runs logs RUN STEP reads through the server too", func(t *testing.T) {
		r := c.run("runs", "logs", id, "talk")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "first\nsecond\n", r.stdout)
	})
}

// TestRunsLogsFollowingAStepReturnsWhenTheStepEnds: runs logs -f RUN STEP
// returns once that step has ended, while the run goes on with the next.
func TestRunsLogsFollowingAStepReturnsWhenTheStepEnds(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	marker := filepath.Join(c.dir, "go-on")
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/two.yaml", `version: 1
name: two
steps:
  - {id: talk, uses: shell, with: {command: 'echo said'}}
  - id: hold
    uses: shell
    with: {command: 'while [ ! -e `+marker+` ]; do sleep 0.05; done'}
`)
	s := c.serveRuns(t)
	defer os.WriteFile(marker, nil, 0o600)
	code, run := s.api(t, "POST", "/api/v1/playbooks/two/runs", map[string]any{})
	require.Equal(t, 201, code, run)
	id := run["id"].(string)

	follow := exec.Command(bin, "runs", "logs", "-f", id, "talk")
	follow.Dir, follow.Env = c.dir, c.env
	var out, errb outBuffer
	follow.Stdout, follow.Stderr = &out, &errb
	require.NoError(t, follow.Start())
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	t.Cleanup(func() { _ = follow.Process.Kill() })
	select {
	case err := <-done:
		require.NoError(t, err, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("runs logs -f RUN talk still follows after talk ended: %q", out.String())
	}
	assert.Equal(t, "said\n", out.String())
	r := c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"status": "running"`, "the run goes on with hold")
}

func TestTheCallsOfHTTPAndCloudStepsAreInTheirOutput(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	c := newCLI(t)
	pb := c.file("calls.yaml", `version: 1
name: calls
steps:
  - id: supports
    uses: nks.supports
  - id: ping
    uses: http.request
    with: {url: "`+srv.URL+`/health?key=query-value-never-shown"}
`)
	r := c.run("run", "--sim", pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	lineIndex(t, r.stdout, "  supports | GET /nks/v1/supports 200 ")

	r = c.run("runs", "logs", id, "supports")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `^GET /nks/v1/supports 200 [0-9.]+(µs|ms|s)\n$`, r.stdout)
	r = c.run("runs", "logs", id, "ping", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var lines []state.OutputLine
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lines), r.stdout)
	require.Len(t, lines, 1)
	assert.Equal(t, state.StreamCall, lines[0].Stream)
	assert.Regexp(t, `^GET 127\.0\.0\.1:\d+/health 204 \S+$`, lines[0].Text)
	assert.NotContains(t, r.stdout, "query-value-never-shown")
}

// A step printing 100 MB with the largest max_output_bytes leaves a small
// state file and a small runs show: the record keeps 1 MiB of stdout, the
// step's log 8 MiB and a note saying what it dropped.
func TestAStepPrinting100MBKeepsTheStateSmall(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pb := c.file("flood.yaml", `version: 1
name: flood
steps:
  - id: flood
    uses: shell
    with:
      command: "yes 'a line of output that repeats' | head -c 100000000"
      max_output_bytes: 67108864
`)
	r := c.run("run", "--quiet", pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	fi, err := os.Stat(c.state)
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(24<<20), "state file size")

	r = c.run("runs", "show", id, "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Less(t, len(r.stdout), 2<<20, "runs show --output json size")
	var doc struct {
		Steps []struct {
			Outputs map[string]any `json:"outputs"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Len(t, doc.Steps, 1)
	assert.Equal(t, true, doc.Steps[0].Outputs["truncated"])
	assert.Len(t, doc.Steps[0].Outputs["stdout"], 1<<20)

	r = c.run("runs", "logs", id, "flood", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var lines []state.OutputLine
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lines))
	kept := 0
	for _, l := range lines[:len(lines)-1] {
		assert.Equal(t, "a line of output that repeats", l.Text)
		kept += len(l.Text) + 1
	}
	assert.LessOrEqual(t, kept, 8<<20)
	assert.Greater(t, kept, 8<<20-100)
	last := lines[len(lines)-1]
	assert.Equal(t, state.StreamNote, last.Stream)
	// The last line has no newline: the count may be one byte over.
	var dropped, lost int
	_, err = fmt.Sscanf(last.Text, "… output truncated: %d more bytes (%d lines) not kept", &dropped, &lost)
	require.NoError(t, err, last.Text)
	assert.InDelta(t, 100000000-kept, dropped, 1, last.Text)
}

func TestRunsLogsRefusesAStepTheRunDoesNotHave(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = append(c.env, "RUNBOOK_SECRET_DEPLOY_TOKEN=x")
	r := c.run("run", c.file("printing.yaml", printingPlaybook))
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	r = c.run("runs", "logs", id, "biuld")
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, `has no step "biuld"`)
	assert.Contains(t, r.stderr, `did you mean "build"`)
	assert.Empty(t, r.stdout)
}

// runs logs reads a store a page of lines at a time; the events still fall
// between the right lines.
func TestRunsLogsInterleavesEventsAcrossPagesOfLines(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("run", "--quiet", c.file("pages.yaml", `version: 1
name: pages
steps:
  - {id: many, uses: shell, with: {command: "seq 1 12000"}}
  - {id: after, uses: shell, with: {command: "echo done"}}
`))
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	r = c.run("runs", "logs", id)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, 12000, strings.Count(r.stdout, "   many | "))
	assert.Less(t, lineIndex(t, r.stdout, "step many started"), lineIndex(t, r.stdout, "   many | 1"))
	assert.Less(t, lineIndex(t, r.stdout, "   many | 12000"), lineIndex(t, r.stdout, "step many succeeded"))
	assert.Less(t, lineIndex(t, r.stdout, "step after started"), lineIndex(t, r.stdout, "   after | done"))
	assert.Less(t, lineIndex(t, r.stdout, "   after | done"), lineIndex(t, r.stdout, "run succeeded"))
}

// On PostgreSQL too: the lines are stored, read by step, masked, and
// followed by a second process while the run goes on (a database is
// shared, so runs logs -f reads it directly).
func TestStepOutputOnPostgreSQL(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	onDatabase(t, c)
	c.env = append(c.env, "RUNBOOK_SECRET_DEPLOY_TOKEN=tok-very-secret-42")
	marker := filepath.Join(c.dir, "go-on")
	pb := c.file("talk.yaml", `version: 1
name: talk
steps:
  - id: talk
    uses: shell
    with:
      command: 'echo "first $T"; while [ ! -e `+marker+` ]; do sleep 0.05; done; echo second >&2'
      env: {T: "${{ secrets.DEPLOY_TOKEN }}"}
`)
	run := exec.Command(bin, "run", pb)
	run.Dir, run.Env = c.dir, c.env
	var runOut outBuffer
	run.Stdout, run.Stderr = &runOut, &runOut
	require.NoError(t, run.Start())
	t.Cleanup(func() { _ = run.Process.Kill() })
	var id string
	deadline := time.Now().Add(15 * time.Second)
	for id == "" || !strings.Contains(runOut.String(), "talk | first ***") {
		require.True(t, time.Now().Before(deadline), "the run did not print its first line: %s", runOut.String())
		if m := runIDRe.FindStringSubmatch(runOut.String()); m != nil {
			id = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	follow := exec.Command(bin, "runs", "logs", "-f", id, "talk")
	follow.Dir, follow.Env = c.dir, c.env
	var out outBuffer
	follow.Stdout, follow.Stderr = &out, &out
	require.NoError(t, follow.Start())
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	t.Cleanup(func() { _ = follow.Process.Kill() })
	for out.String() != "first ***\n" {
		require.True(t, time.Now().Before(deadline), "runs logs -f did not print the first line: %q", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	require.NoError(t, run.Wait(), runOut.String())
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("runs logs -f did not return when the run ended: %q", out.String())
	}
	assert.Equal(t, "first ***\nsecond\n", out.String())
	assert.NotContains(t, runOut.String(), "tok-very-secret-42")
}
