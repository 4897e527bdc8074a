package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/server"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	_ "github.com/runbook/runbook/internal/steps/all"
	"github.com/runbook/runbook/internal/trigger"
)

const token = "ui-test-token-5678"

// demoPlaybook has typed inputs, an approval with typed fields and a step
// that fails when asked to.
const demoPlaybook = `version: 1
name: demo
description: A demo of the web UI.
inputs:
  cluster: {type: string, required: true, pattern: '^[a-z][a-z0-9-]*$', description: cluster name}
  nodes: {type: integer, default: 3, min: 1, max: 10}
  mode: {type: string, enum: [safe, fast], default: safe}
  fail: {type: boolean, default: false}
steps:
  - id: hello
    uses: log
    with: {message: "hello ${{ inputs.cluster }}", fields: {nodes: "${{ inputs.nodes }}"}}
  - id: approve
    uses: approval
    with:
      message: "Upgrade ${{ inputs.cluster }}?"
      allow_self_approval: true # the tests answer as the name they started under
      fields:
        ticket: {type: string, required: true}
        window: {type: integer, required: true}
  - id: work
    uses: fail
    if: ${{ inputs.fail }}
    with: {message: "work failed on ${{ inputs.cluster }}"}
  - id: report
    needs: [hello]
    uses: log
    with: {message: "report for ${{ inputs.cluster }}"}
`

// slowPlaybook runs long enough to be cancelled.
const slowPlaybook = `version: 1
name: slow
steps:
  - id: nap
    uses: sleep
    with: {duration: 1h}
triggers:
  - schedule: {cron: "0 3 * * *", timezone: Asia/Seoul}
`

// uiEnv is a server on loopback over a real bbolt file, and a browser-like
// client with a cookie jar that does not follow redirects.
type uiEnv struct {
	t      testing.TB
	srv    *server.Server
	store  state.Store // the server's (startServer)
	url    string
	client *http.Client
}

func startServer(t *testing.T, playbooks map[string]string, opts ...func(*server.Options)) *uiEnv {
	t.Helper()
	dir := t.TempDir()
	for name, src := range playbooks {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	statePath := filepath.Join(t.TempDir(), "state.db")
	store, err := bolt.Open(statePath, bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(t, err)
	o := server.Options{
		Engine:    engine.Options{Store: store, Environ: []string{}},
		Playbooks: dir, Listen: "127.0.0.1:0", Token: token,
		Routes:    map[string]trigger.Route{"sms": {Secret: "hook-secret"}},
		Schedules: true, ShutdownGrace: 5 * time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := server.New(o)
	if err != nil {
		store.Close()
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		cancel()
		store.Close()
		t.Fatalf("server stopped at start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("server did not stop")
		}
		assert.NoError(t, store.Close())
	})
	e := newClient(t, srv, "http://"+srv.Addr())
	e.store = store
	return e
}

func newClient(t testing.TB, srv *server.Server, base string) *uiEnv {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &uiEnv{t: t, srv: srv, url: base, client: c}
}

// page is one answer.
type page struct {
	status   int
	location string
	header   http.Header
	body     string
}

func (e *uiEnv) do(req *http.Request) page {
	e.t.Helper()
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return page{status: resp.StatusCode, location: resp.Header.Get("Location"), header: resp.Header, body: string(b)}
}

func (e *uiEnv) get(path string) page {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	require.NoError(e.t, err)
	return e.do(req)
}

// post sends a form as a browser of this site does.
func (e *uiEnv) post(path string, form url.Values) page {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	return e.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the forms of a page.
func csrf(t testing.TB, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has no form with a CSRF token:\n%s", body)
	return m[1]
}

// login signs in with tok and returns the first page after it.
func (e *uiEnv) login(tok, name string) page {
	e.t.Helper()
	lp := e.get("/login")
	require.Equal(e.t, http.StatusOK, lp.status)
	return e.post("/login", url.Values{"csrf": {csrf(e.t, lp.body)}, "token": {tok}, "name": {name}, "next": {"/runs"}})
}

// signedIn logs in with the server's token and returns the CSRF token of
// the session.
func (e *uiEnv) signedIn() string {
	e.t.Helper()
	p := e.login(token, "alice")
	require.Equal(e.t, http.StatusSeeOther, p.status, p.body)
	runs := e.get("/runs")
	require.Equal(e.t, http.StatusOK, runs.status, runs.body)
	return csrf(e.t, runs.body)
}

var runLink = regexp.MustCompile(`^/runs/([^/#?]+)`)

// runID is the run a redirect goes to.
func runID(t *testing.T, p page) string {
	t.Helper()
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	m := runLink.FindStringSubmatch(p.location)
	require.NotNil(t, m, "redirect to %q", p.location)
	id, err := url.PathUnescape(m[1])
	require.NoError(t, err)
	return id
}

// waitFor polls a page until cond holds on its body.
func (e *uiEnv) waitFor(path string, cond func(string) bool) page {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		p := e.get(path)
		if cond(p.body) {
			return p
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never showed what was awaited; last:\n%s", path, p.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
