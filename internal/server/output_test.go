package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/state"
)

func (e *env) stream(path string, header map[string]string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { resp.Body.Close() })
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	return resp
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct{ id, typ, data string }

func readEvent(t *testing.T, r *bufio.Reader) (sseEvent, bool) {
	t.Helper()
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return ev, false
		}
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if ev.typ != "" || ev.data != "" {
				return ev, true
			}
			continue
		}
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.typ = value
		case "data":
			ev.data = value
		}
	}
}

func outputLine(t *testing.T, ev sseEvent) state.OutputLine {
	t.Helper()
	var l state.OutputLine
	require.NoError(t, json.Unmarshal([]byte(ev.data), &l), ev.data)
	return l
}

// A step's lines reach the stream while it still runs, as "output" events
// with ids that resume both the events and the lines; secrets are masked.
func TestLogsStreamCarriesStepOutputAsItIsPrinted(t *testing.T) {
	work := t.TempDir()
	marker := filepath.Join(work, "go-on")
	e := newEnv(t, map[string]string{"talk.yaml": `version: 1
name: talk
inputs:
  password: {type: string, secret: true}
steps:
  - id: talk
    uses: shell
    with:
      command: 'echo "first $PW"; while [ ! -e ` + marker + ` ]; do sleep 0.05; done; echo second >&2'
      env: {PW: "${{ inputs.password }}"}
`})
	r := e.api("POST", "/api/v1/playbooks/talk/runs", map[string]any{"inputs": map[string]any{"password": "hunter2-very-secret"}})
	require.Equal(t, 201, r.status, "%s", r.body)
	id := r.json(t)["id"].(string)

	resp := e.stream("/api/v1/runs/"+id+"/logs?output=true", nil)
	br := bufio.NewReader(resp.Body)
	var seen []sseEvent
	for {
		ev, ok := readEvent(t, br)
		require.True(t, ok, "the stream ended before the first line: %+v", seen)
		seen = append(seen, ev)
		if ev.typ == api.OutputEvent {
			l := outputLine(t, ev)
			assert.Equal(t, "first ***", l.Text)
			assert.Equal(t, "talk", l.Step)
			assert.Equal(t, state.StreamStdout, l.Stream)
			break
		}
	}
	// The step is still running: the line came as it was printed.
	run := e.api("GET", "/api/v1/runs/"+id, nil).json(t)
	assert.Equal(t, "running", run["status"])
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	var outputs []state.OutputLine
	var last sseEvent
	for {
		ev, ok := readEvent(t, br)
		if !ok {
			break
		}
		seen = append(seen, ev)
		last = ev
		if ev.typ == api.OutputEvent {
			outputs = append(outputs, outputLine(t, ev))
		}
	}
	require.Len(t, outputs, 1)
	assert.Equal(t, "second", outputs[0].Text)
	assert.Equal(t, state.StreamStderr, outputs[0].Stream)
	assert.Equal(t, "end", last.typ)
	assert.JSONEq(t, `{"status":"succeeded"}`, last.data)
	types := map[string]bool{}
	for _, ev := range seen {
		types[ev.typ] = true
		assert.NotContains(t, ev.data, "hunter2")
	}
	assert.True(t, types["run.succeeded"], "the run's events are in the stream too")

	// Resuming from the id of the first line sends the second only.
	var firstID string
	for _, ev := range seen {
		if ev.typ == api.OutputEvent {
			firstID = ev.id
			break
		}
	}
	require.Contains(t, firstID, ".")
	resp2 := e.stream("/api/v1/runs/"+id+"/logs?output=true", map[string]string{"Last-Event-ID": firstID})
	body, err := io.ReadAll(resp2.Body)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(body), "event: output\n"), "%s", body)
	assert.Contains(t, string(body), `"text":"second"`)

	// One step's lines alone, without the events.
	resp3 := e.stream("/api/v1/runs/"+id+"/logs?output=true&events=false&step=talk", nil)
	body, err = io.ReadAll(resp3.Body)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(body), "event: output\n"), "%s", body)
	assert.Equal(t, 3, strings.Count(string(body), "event: "), "two lines and the end: %s", body)

	// Without ?output=true the stream is as before: events only.
	resp4 := e.stream("/api/v1/runs/"+id+"/logs", nil)
	body, err = io.ReadAll(resp4.Body)
	require.NoError(t, err)
	assert.NotContains(t, string(body), "event: output")
	assert.Contains(t, string(body), "event: run.succeeded")
}

func TestOutputRoutePagesAStepsLines(t *testing.T) {
	e := newEnv(t, map[string]string{"count.yaml": `version: 1
name: count
steps:
  - id: count
    uses: shell
    with: {command: "seq 1 5"}
  - id: other
    uses: shell
    with: {command: "echo other"}
`})
	id := e.api("POST", "/api/v1/playbooks/count/runs", nil).json(t)["id"].(string)
	e.waitStatus(id, state.RunSucceeded)

	var page api.OutputPage
	r := e.api("GET", "/api/v1/runs/"+id+"/output?step=count&after=1&limit=3", nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &page))
	assert.Equal(t, state.RunSucceeded, page.Status)
	var texts []string
	for _, l := range page.Lines {
		texts = append(texts, l.Text)
	}
	assert.Equal(t, []string{"2", "3", "4"}, texts)

	r = e.api("GET", "/api/v1/runs/"+id+"/output", nil)
	require.NoError(t, json.Unmarshal(r.body, &page))
	assert.Len(t, page.Lines, 6)
	assert.Equal(t, "other", page.Lines[5].Text)

	assert.Equal(t, 404, e.api("GET", "/api/v1/runs/nope/output", nil).status)
	assert.Equal(t, 401, e.do("GET", "/api/v1/runs/"+id+"/output", "", nil).status)
	assert.Equal(t, 400, e.api("GET", "/api/v1/runs/"+id+"/output?after=x", nil).status)
}
