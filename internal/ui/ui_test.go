package ui_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignIn(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook})

	t.Run("the root goes to the runs, and the runs to the sign-in", func(t *testing.T) {
		p := e.get("/")
		assert.Equal(t, http.StatusFound, p.status)
		assert.Equal(t, "/runs", p.location)
		p = e.get("/runs?status=failed")
		assert.Equal(t, http.StatusSeeOther, p.status)
		assert.Equal(t, "/login?next="+url.QueryEscape("/runs?status=failed"), p.location)
	})

	t.Run("the login form names its token field token", func(t *testing.T) {
		p := e.get("/login")
		assert.Contains(t, p.body, `name="token"`)
		assert.Contains(t, p.body, `type="password"`)
	})

	t.Run("a wrong token is refused on the form", func(t *testing.T) {
		p := e.login("nope", "")
		assert.Equal(t, http.StatusUnauthorized, p.status)
		assert.Contains(t, p.body, "not valid for this server")
		assert.Equal(t, http.StatusSeeOther, e.get("/runs").status, "still signed out")
	})

	t.Run("the right token opens a session in an HttpOnly SameSite=Strict cookie", func(t *testing.T) {
		p := e.login(token, "alice")
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		assert.Equal(t, "/runs", p.location)
		var cookie string
		for _, c := range p.header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "runbook_session=") {
				cookie = c
			}
		}
		require.NotEmpty(t, cookie)
		assert.Contains(t, cookie, "HttpOnly")
		assert.Contains(t, cookie, "SameSite=Strict")
		assert.NotContains(t, cookie, token, "the token never reaches the browser")
		runs := e.get("/runs")
		assert.Equal(t, http.StatusOK, runs.status)
		assert.Contains(t, runs.body, "alice")
		assert.NotContains(t, runs.body, token)
	})

	t.Run("every page carries the security headers", func(t *testing.T) {
		p := e.get("/runs")
		csp := p.header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "script-src 'self'")
		assert.Contains(t, csp, "frame-ancestors 'none'")
		assert.NotContains(t, csp, "unsafe-inline")
		assert.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
		assert.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
		assert.Equal(t, "no-store", p.header.Get("Cache-Control"))
	})

	t.Run("signing out ends the session", func(t *testing.T) {
		tok := csrf(t, e.get("/runs").body)
		p := e.post("/logout", url.Values{"csrf": {tok}})
		assert.Equal(t, http.StatusSeeOther, p.status)
		assert.Equal(t, http.StatusSeeOther, e.get("/runs").status)
	})
}

func TestForgedRequestsAreRefused(t *testing.T) {
	e := startServer(t, map[string]string{"slow.yaml": slowPlaybook})
	tok := e.signedIn()
	start := e.post("/playbooks/slow/runs", url.Values{"csrf": {tok}})
	id := runID(t, start)

	t.Run("a form without the session's CSRF token", func(t *testing.T) {
		p := e.post("/runs/"+id+"/cancel", url.Values{"csrf": {"forged"}})
		assert.Equal(t, http.StatusForbidden, p.status)
		assert.Contains(t, p.body, "CSRF")
	})
	t.Run("a form posted from another site", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, e.url+"/runs/"+id+"/cancel", strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		assert.Equal(t, http.StatusForbidden, e.do(req).status)
	})
	t.Run("a login form without its cookie", func(t *testing.T) {
		other := newClient(t, e.srv, e.url)
		p := other.post("/login", url.Values{"csrf": {"x"}, "token": {token}})
		assert.Equal(t, http.StatusForbidden, p.status)
	})
	t.Run("a login that would go to another site goes to the runs", func(t *testing.T) {
		other := newClient(t, e.srv, e.url)
		lp := other.get("/login?next=//evil.example/x")
		p := other.post("/login", url.Values{"csrf": {csrf(t, lp.body)}, "token": {token}, "next": {"//evil.example/x"}})
		assert.Equal(t, "/runs", p.location)
	})
	run := e.waitFor("/runs/"+id, func(b string) bool {
		return strings.Contains(b, `class="st st-running"`) || strings.Contains(b, `class="st st-waiting"`)
	}) // a long sleep parks
	assert.NotContains(t, run.body, "cancelled", "nothing above cancelled the run")
}

func TestPagesRender(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook, "slow.yaml": slowPlaybook})
	tok := e.signedIn()
	id := runID(t, e.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"prod-a"}}))
	e.waitFor("/runs/"+id, func(b string) bool { return strings.Contains(b, `id="approval"`) })
	for _, path := range []string{"/runs", "/runs/" + id, "/playbooks", "/playbooks/demo", "/playbooks/slow",
		"/approvals", "/deliveries", "/notifications", "/schedules", "/health"} {
		t.Run(path, func(t *testing.T) {
			p := e.get(path)
			require.Equal(t, http.StatusOK, p.status, p.body)
			assert.Contains(t, p.body, "</html>")
			assertNoInlineCode(t, p.body)
		})
	}
	t.Run("the approvals page asks each waiting step's question", func(t *testing.T) {
		p := e.get("/approvals")
		assert.Contains(t, p.body, "Upgrade prod-a?")
		assert.Contains(t, p.body, `action="/runs/`+id+`/approve"`)
	})
	t.Run("an unknown page is a 404 page", func(t *testing.T) {
		p := e.get("/nope")
		assert.Equal(t, http.StatusNotFound, p.status)
		assert.Contains(t, p.body, "There is no page /nope")
	})
	t.Run("the health page counts the run parked on its approval", func(t *testing.T) {
		// The approval is shown once recorded; the run is parked just after.
		parked := regexp.MustCompile(`<h2>Runs parked here \(waiting with no goroutine\)</h2>\s*<table class="kv"><tr><td class="num">1</td>`)
		e.waitFor("/health", parked.MatchString)
	})
	t.Run("the API and health keep their JSON", func(t *testing.T) {
		p := e.get("/healthz")
		var h map[string]any
		require.NoError(t, json.Unmarshal([]byte(p.body), &h))
		assert.Equal(t, "ok", h["status"])
		p = e.get("/api/v1/nope")
		assert.Equal(t, http.StatusUnauthorized, p.status)
	})
}

var (
	scriptTag   = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	inlineEvent = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	styleAttr   = regexp.MustCompile(`(?i)\sstyle\s*=`)
)

// assertNoInlineCode checks what the CSP forbids: inline scripts, event
// handler attributes and style attributes.
func assertNoInlineCode(t *testing.T, body string) {
	t.Helper()
	for _, tag := range scriptTag.FindAllString(body, -1) {
		assert.Contains(t, tag, "src=", "an inline script: %s", tag)
	}
	assert.False(t, inlineEvent.MatchString(body), "an inline event handler")
	assert.False(t, styleAttr.MatchString(body), "a style attribute")
	assert.NotContains(t, strings.ToLower(body), "<style")
}

// The flows of the browser test, as forms posted without a browser.
func TestFormsStartApproveRetryAndCancel(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook, "slow.yaml": slowPlaybook})
	tok := e.signedIn()

	t.Run("the start form is generated from the typed inputs", func(t *testing.T) {
		p := e.get("/playbooks/demo")
		for _, want := range []string{`name="in.cluster"`, `name="in.nodes"`, `inputmode="numeric"`, `<option>safe</option>`,
			`<option>fast</option>`, "pattern ^[a-z][a-z0-9-]*$", "min 1, max 10", "default 3"} {
			assert.Contains(t, p.body, want)
		}
	})

	t.Run("inputs the CLI refuses are refused beside their fields, keeping what was typed", func(t *testing.T) {
		p := e.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"Bad Name"}, "in.nodes": {"many"}, "in.mode": {"slow"}})
		assert.Equal(t, http.StatusBadRequest, p.status)
		assert.Regexp(t, `id="e-cluster"[^>]*>.*does not match pattern`, p.body)
		assert.Regexp(t, `id="e-nodes"[^>]*>.*nodes`, p.body)
		assert.Regexp(t, `id="e-mode"[^>]*>.*mode`, p.body)
		assert.Contains(t, p.body, `value="Bad Name"`)
		runs := e.get("/runs")
		assert.Contains(t, runs.body, "No runs.", "nothing started")
	})

	var failed string
	t.Run("a wrong answer keeps the run waiting; a right one lets it go on", func(t *testing.T) {
		failed = runID(t, e.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"prod-a"}, "in.fail": {"true"}}))
		p := e.waitFor("/runs/"+failed, func(b string) bool { return strings.Contains(b, `id="approval"`) })
		assert.Contains(t, p.body, `name="f.ticket"`)
		assert.Contains(t, p.body, "Upgrade prod-a?")
		bad := e.post("/runs/"+failed+"/approve", url.Values{"csrf": {tok}, "step": {"approve"}, "decision": {"approve"}, "f.window": {"soon"},
			"comment": {"typo"}})
		assert.Equal(t, http.StatusBadRequest, bad.status)
		assert.Regexp(t, `id="e-ticket"[^>]*>.*field ticket is required`, bad.body)
		assert.Regexp(t, `id="e-window"[^>]*>.*field window must be an integer`, bad.body)
		assert.Contains(t, bad.body, `value="soon"`)
		assert.Contains(t, e.get("/runs/"+failed).body, `id="approval"`, "still waiting")
		good := e.post("/runs/"+failed+"/approve", url.Values{"csrf": {tok}, "step": {"approve"}, "decision": {"approve"},
			"f.ticket": {"CHG-1"}, "f.window": {"30"}})
		require.Equal(t, http.StatusSeeOther, good.status, good.body)
		p = e.waitFor("/runs/"+failed, func(b string) bool { return strings.Contains(b, "Retry from") })
		assert.Contains(t, p.body, "approved by alice", "the answer is recorded under the name given at sign-in")
		assert.Contains(t, p.body, "work failed on prod-a")
	})

	t.Run("retry from a chosen step reuses the steps before it", func(t *testing.T) {
		next := runID(t, e.post("/runs/"+failed+"/retry", url.Values{"csrf": {tok}, "from": {"work"}}))
		assert.NotEqual(t, failed, next)
		p := e.waitFor("/runs/"+next, func(b string) bool { return !strings.Contains(b, "data-follow") })
		assert.Contains(t, p.body, "Retry of")
		assert.Contains(t, p.body, failed)
		assert.Contains(t, p.body, "step.reused")
		bad := e.post("/runs/"+failed+"/retry", url.Values{"csrf": {tok}, "from": {"nope"}})
		assert.Equal(t, http.StatusBadRequest, bad.status)
		assert.Contains(t, bad.body, "nope")
	})

	t.Run("cancel", func(t *testing.T) {
		id := runID(t, e.post("/playbooks/slow/runs", url.Values{"csrf": {tok}}))
		e.waitFor("/runs/"+id, func(b string) bool {
			return strings.Contains(b, `class="st st-running"`) || strings.Contains(b, `class="st st-waiting"`)
		}) // a long sleep parks
		p := e.post("/runs/"+id+"/cancel", url.Values{"csrf": {tok}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		p = e.waitFor("/runs/"+id, func(b string) bool { return !strings.Contains(b, "data-follow") })
		assert.Regexp(t, `</h1>\s*<span class="st st-cancelled">`, p.body)
		assert.Contains(t, p.body, "cancelled by alice")
		again := e.post("/runs/"+id+"/cancel", url.Values{"csrf": {tok}})
		assert.Equal(t, http.StatusConflict, again.status)
		assert.Contains(t, again.body, "already cancelled")
	})
}
