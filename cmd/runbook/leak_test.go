package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The leak matrix: one playbook derives a secret (and a secret input) every
// way the README's promise covers — expression functions, slices, string
// building, shell programs, HTTP headers and bodies echoed back, step
// outputs, for_each items, a sub-playbook, an approval — and no form of it
// may appear in anything runbook writes or answers.
const (
	leakSecret = "Lk7mQ2vX9pR4tZ8wN3bC6dF1"
	leakInput  = "hunter-Input-5577zz"
)

const leakPlaybook = `version: 1
name: leaky
inputs:
  pw: {type: string, secret: true}
env:
  LOWER_TOKEN: ${{ lower(secrets.TOKEN) }}
steps:
  - id: derive
    uses: set
    with:
      up: ${{ upper(secrets.TOKEN) }}
      low: ${{ lower(secrets.TOKEN) }}
      sum: ${{ sha256(secrets.TOKEN) }}
      head: ${{ secrets.TOKEN[0:12] }}
      half: ${{ truncate(secrets.TOKEN, 12) }}
      swapped: ${{ replace(secrets.TOKEN, "7", "#") }}
      spaced: ${{ join(split(secrets.TOKEN, ""), " ") }}
      nested: {list: ["${{ upper(secrets.TOKEN) }}", {deep: "x-${{ secrets.TOKEN[2:14] }}-y"}]}
      pw_up: ${{ upper(inputs.pw) }}
      pw_spaced: ${{ join(split(inputs.pw, ""), " ") }}
      b64: ${{ base64Encode(secrets.TOKEN) }}
      url: ${{ urlEncode(secrets.TOKEN + "/&") }}
      json: '${{ toJSON({"t": secrets.TOKEN}) }}'
      concat: ${{ "pre-" + secrets.TOKEN + "-post" }}
  - id: say
    uses: log
    with:
      message: "up=${{ upper(secrets.TOKEN) }} sum=${{ sha256(secrets.TOKEN) }} head=${{ secrets.TOKEN[0:12] }} spaced=${{ join(split(secrets.TOKEN, ''), ' ') }} env=${{ env.LOWER_TOKEN }} pw=${{ inputs.pw }}"
      fields: {swapped: '${{ replace(secrets.TOKEN, "7", "#") }}'}
  - id: sh
    uses: shell
    with:
      env: {TOKEN: "${{ secrets.TOKEN }}", PW: "${{ inputs.pw }}", DERIVED: "${{ lower(secrets.TOKEN) }}"}
      command: |
        printf '%s\n' "$TOKEN" | rev
        echo "$TOKEN" | tr a-z A-Z
        echo "$TOKEN" | sha256sum
        printf '%s' "$TOKEN" | sha256sum
        echo "$TOKEN" | cut -c1-12
        echo "$PW" | rev
        echo "derived $DERIVED"
        echo "to stderr $TOKEN" | tr A-Z a-z >&2
    outputs:
      first: ${{ split(result.stdout, "\n")[0] }}
      upper_out: ${{ upper(result.stdout) }}
  - id: call
    uses: http.request
    with:
      method: POST
      url: ECHO_URL
      headers: {X-Up: "${{ upper(secrets.TOKEN) }}", X-Head: "${{ secrets.TOKEN[0:12] }}", Authorization: "Bearer ${{ secrets.TOKEN }}"}
      json: {sum: "${{ sha256(secrets.TOKEN) }}", spaced: "${{ join(split(secrets.TOKEN, ''), ' ') }}", pw: "${{ upper(inputs.pw) }}"}
    outputs:
      tok: ${{ truncate(secrets.TOKEN, 12) }}
      body_up: ${{ upper(result.body) }}
  - id: each
    uses: log
    for_each: ${{ [upper(secrets.TOKEN), secrets.TOKEN[0:12], lower(inputs.pw)] }}
    with: {message: "item ${{ item }} ${{ sha256(item) }}"}
  - id: child
    uses: playbook
    with:
      path: child.yaml
      inputs: {v: "${{ lower(secrets.TOKEN) }}", w: "${{ secrets.TOKEN[0:12] }}"}
  - id: gate
    uses: approval
    with: {message: "ship ${{ secrets.TOKEN[0:12] }} / ${{ upper(secrets.TOKEN) }}?"}
  - id: after
    uses: log
    with: {message: "approved; child said ${{ steps.child.outputs.echo }}"}
outputs:
  final: ${{ upper(secrets.TOKEN) + "!" }}
  via_step: ${{ steps.derive.outputs.up }}
`

const leakChild = `version: 1
name: leaky-child
inputs:
  v: {type: string}
  w: {type: string}
steps:
  - {id: say, uses: log, with: {message: "child got ${{ inputs.v }} ${{ upper(inputs.v) }} ${{ inputs.w }}"}}
  - {id: sh, uses: shell, with: {command: 'echo "$V" | rev; echo "$V" | cut -c1-10', env: {V: "${{ inputs.v }}"}}}
outputs:
  echo: ${{ inputs.v }}
`

// leakForms returns every form of the secrets that must not appear.
func leakForms() map[string]string {
	rev := func(s string) string {
		b := []byte(s)
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return string(b)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	s, pw := leakSecret, leakInput
	return map[string]string{
		"the secret":                      s,
		"its base64":                      base64.StdEncoding.EncodeToString([]byte(s)),
		"its hex":                         hex.EncodeToString([]byte(s)),
		"its URL form with a suffix":      url.QueryEscape(s + "/&"),
		"upper()":                         strings.ToUpper(s),
		"lower()":                         strings.ToLower(s),
		"sha256()":                        sum(s),
		"sha256sum of echo":               sum(s + "\n"),
		"a 12-character slice":            s[:12],
		"a slice from the middle":         s[2:14],
		"replace()":                       strings.ReplaceAll(s, "7", "#"),
		"one character at a time":         strings.Join(strings.Split(s, ""), " "),
		"rev":                             rev(s),
		"cut -c1-10 of lower()":           strings.ToLower(s)[:10],
		"the secret input":                pw,
		"the secret input upper-cased":    strings.ToUpper(pw),
		"the secret input reversed":       rev(pw),
		"the secret input lower-cased":    strings.ToLower(pw),
		"sha256 of an upper-cased item":   sum(strings.ToUpper(s)),
		"the secret input, one at a time": strings.Join(strings.Split(pw, ""), " "),
	}
}

// leakCheck fails for every form found in text, naming where.
func leakCheck(t *testing.T, where, text string) {
	t.Helper()
	for name, form := range leakForms() {
		if i := strings.Index(text, form); i >= 0 {
			t.Errorf("%s leaks %s (%q) at byte %d: …%s…", where, name, form, i, text[max(i-40, 0):min(i+len(form)+40, len(text))])
		}
	}
}

func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", r.Header.Get("X-Up"))
		_ = json.NewEncoder(w).Encode(map[string]any{"headers": r.Header, "body": string(body)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLeakMatrix(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env = append(c.env, "RUNBOOK_SECRET_TOKEN="+leakSecret)
	echo := echoServer(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	src := strings.Replace(leakPlaybook, "ECHO_URL", echo.URL+"/echo", 1)
	pb := c.file("playbooks/leaky.yaml", src)
	c.file("playbooks/child.yaml", leakChild)

	// Every CLI answer, in text and JSON.
	var outputs []string
	check := func(where string, r result) {
		t.Helper()
		outputs = append(outputs, where)
		leakCheck(t, where+" stdout", r.stdout)
		leakCheck(t, where+" stderr", r.stderr)
	}
	for _, format := range []string{"text", "json"} {
		r := c.run("plan", pb, "-i", "pw="+leakInput, "--output", format)
		check("plan --output "+format, r)

		r = c.run("run", pb, "-i", "pw="+leakInput, "--output", format)
		require.Equal(t, 0, r.code, r)
		check("run --output "+format, r)
		var id string
		if format == "json" {
			m := regexp.MustCompile(`"run_id": "([^"]+)"`).FindStringSubmatch(r.stdout)
			require.NotNil(t, m, r.stdout)
			id = m[1]
		} else {
			id = runIDOf(t, r.stdout)
		}
		// The answer is recorded; the run holds for its secret input,
		// given again to resume it.
		r = c.run("runs", "approve", id, "gate", "--by", "alice", "--output", format)
		require.Contains(t, r.stdout+r.stderr, "resume it with", r)
		check("runs approve --output "+format, r)
		r = c.run("run", "--resume", id, "-i", "pw="+leakInput, "--output", format)
		require.Equal(t, 0, r.code, r)
		check("run --resume --output "+format, r)
		for _, args := range [][]string{{"runs", "show", id}, {"runs", "logs", id}, {"runs", "list"}} {
			r = c.run(append(args, "--output", format)...)
			require.Equal(t, 0, r.code, r)
			check(strings.Join(args[:2], " ")+" --output "+format, r)
		}
		require.Contains(t, c.run("runs", "show", id).stdout, "succeeded", "the run went through every step")
	}

	// The same through a real server: the CLI verbs and every API route.
	s := c.serve("--playbooks", filepath.Join(c.dir, "playbooks"))
	c.env = append(c.env, "RUNBOOK_API_TOKEN="+serveToken)
	get := func(path string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err, path)
		require.Less(t, resp.StatusCode, 300, "%s: %s", path, b)
		leakCheck(t, "GET "+path, string(b))
		return string(b)
	}
	code, run := s.api(t, "POST", "/api/v1/playbooks/leaky/runs", map[string]any{"inputs": map[string]any{"pw": leakInput}})
	require.Equal(t, 201, code, run)
	b, _ := json.Marshal(run)
	leakCheck(t, "POST /api/v1/playbooks/leaky/runs", string(b))
	id := run["id"].(string)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(get("/api/v1/runs/"+id), `"waiting"`) {
		require.True(t, time.Now().Before(deadline), "the API run does not reach its approval:\n%s", s.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
	code, ans := s.api(t, "POST", "/api/v1/runs/"+id+"/approve", map[string]any{"approve": true, "step": "gate", "by": "bob"})
	require.Less(t, code, 300, ans)
	b, _ = json.Marshal(ans)
	leakCheck(t, "POST /api/v1/runs/"+id+"/approve", string(b))
	// The SSE stream ends with the run.
	sse := get("/api/v1/runs/" + id + "/logs")
	require.Contains(t, sse, "event: end", "the SSE stream followed the run to its end")
	sc := bufio.NewScanner(strings.NewReader(sse))
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			events++
		}
	}
	require.Greater(t, events, 10, "the stream carried the run's events")
	for _, path := range []string{
		"/api/v1/runs/" + id, "/api/v1/runs/" + id + "/events", "/api/v1/runs/" + id + "/logs?follow=false",
		"/api/v1/runs", "/api/v1/runs?status=succeeded", "/api/v1/playbooks", "/api/v1/playbooks/leaky",
	} {
		get(path)
	}
	require.Contains(t, get("/api/v1/runs/"+id), `"succeeded"`, s.stderr.String())
	for _, args := range [][]string{{"runs", "show", id}, {"runs", "logs", id}, {"runs", "list"}} {
		for _, format := range []string{"text", "json"} {
			r := c.run(append(args, "--output", format)...)
			require.Equal(t, 0, r.code, r)
			check("through serve: "+strings.Join(args[:2], " ")+" --output "+format, r)
		}
	}
	s.stop(t)
	leakCheck(t, "runbook serve's log", s.stderr.String())

	// The state file, byte for byte.
	data, err := os.ReadFile(c.state)
	require.NoError(t, err)
	leakCheck(t, "the bbolt state file", string(data))
	require.Contains(t, string(data), "leaky-child", "the state file holds the runs checked")
	t.Logf("checked %d forms in %d CLI answers, the API routes, the server log and %d bytes of state", len(leakForms()), len(outputs), len(data))
}
