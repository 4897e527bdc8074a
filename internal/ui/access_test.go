package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/ui"
)

// withIdentity serves a UI over e's server whose sign-in gives the
// permissions perms to the server's token, as the roles of a token will.
func withIdentity(t *testing.T, e *uiEnv, perms ui.Permissions) *uiEnv {
	t.Helper()
	web, err := ui.New(ui.Options{API: e.srv.Handler(), Sessions: e.store, Identify: func(_ context.Context, tok string) (ui.Identity, error) {
		if tok != token {
			return ui.Identity{}, ui.ErrBadToken
		}
		return ui.Identity{Name: "vera", Perms: perms}, nil
	}})
	require.NoError(t, err)
	hs := httptest.NewServer(web)
	t.Cleanup(hs.Close)
	return newClient(t, e.srv, hs.URL)
}

func TestAViewerIsOfferedNothingItMayNotDo(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook, "slow.yaml": slowPlaybook})
	tok := e.signedIn()
	waiting := runID(t, e.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"prod-a"}}))
	e.waitFor("/runs/"+waiting, func(b string) bool { return strings.Contains(b, `id="approval"`) })
	failed := runID(t, e.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"prod-b"}, "in.fail": {"true"}}))
	e.waitFor("/runs/"+failed, func(b string) bool { return strings.Contains(b, `id="approval"`) })
	approve := e.post("/runs/"+failed+"/approve", url.Values{"csrf": {tok}, "step": {"approve"}, "decision": {"approve"},
		"f.ticket": {"T-1"}, "f.window": {"30"}})
	require.Equal(t, http.StatusSeeOther, approve.status, approve.body)
	e.waitFor("/runs/"+failed, func(b string) bool { return strings.Contains(b, `Retry from`) })

	v := withIdentity(t, e, nil)
	require.Equal(t, http.StatusSeeOther, v.login(token, "").status)
	vtok := csrf(t, v.get("/runs").body)

	t.Run("pages show the data and no form that changes it", func(t *testing.T) {
		for path, absent := range map[string][]string{
			"/playbooks/demo":  {`action="/playbooks/demo/runs"`},
			"/playbooks":       {`action="/playbooks/reload"`},
			"/runs/" + waiting: {`/approve"`, `/cancel"`, "Approve"},
			"/runs/" + failed:  {`/retry"`, "Retry from", `/resume"`},
			"/approvals":       {`/approve"`},
		} {
			p := v.get(path)
			require.Equal(t, http.StatusOK, p.status, path)
			for _, a := range absent {
				assert.NotContains(t, p.body, a, "%s offers %s", path, a)
			}
		}
		assert.Contains(t, v.get("/playbooks/demo").body, "You may not start runs of this playbook.")
		assert.Contains(t, v.get("/runs/"+waiting).body, "You may not answer approvals of this playbook.")
	})

	t.Run("a form made by hand is refused before the API is called", func(t *testing.T) {
		for path, form := range map[string]url.Values{
			"/runs/" + waiting + "/cancel":  {},
			"/runs/" + waiting + "/approve": {"step": {"approve"}, "decision": {"reject"}},
			"/runs/" + failed + "/retry":    {"from": {"work"}},
			"/playbooks/demo/runs":          {"in.cluster": {"x"}},
			"/playbooks/reload":             {},
		} {
			form.Set("csrf", vtok)
			p := v.post(path, form)
			assert.Equal(t, http.StatusForbidden, p.status, path)
			assert.Contains(t, p.body, "You may not", path)
		}
		assert.Contains(t, e.get("/runs/"+waiting).body, `id="approval"`, "the run still waits")
	})
}

func TestPermissionsLimitedToSomePlaybooks(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook, "slow.yaml": slowPlaybook})
	o := withIdentity(t, e, ui.Grants{{Actions: ui.Actions, Playbooks: []string{"de*"}}})
	require.Equal(t, http.StatusSeeOther, o.login(token, "").status)
	assert.Contains(t, o.get("/playbooks/demo").body, `action="/playbooks/demo/runs"`)
	assert.NotContains(t, o.get("/playbooks/slow").body, `action="/playbooks/slow/runs"`)
	assert.NotContains(t, o.get("/playbooks").body, `action="/playbooks/reload"`, "a reload is about no playbook")
	tok := csrf(t, o.get("/runs").body)
	assert.Equal(t, http.StatusForbidden, o.post("/playbooks/slow/runs", url.Values{"csrf": {tok}}).status)
	assert.Equal(t, http.StatusSeeOther, o.post("/playbooks/demo/runs", url.Values{"csrf": {tok}, "in.cluster": {"x"}}).status)
}

func TestPermissionsAllows(t *testing.T) {
	p := ui.Grants{
		{Actions: []ui.Action{ui.StartRun}, Playbooks: []string{"nks-*"}},
		{Actions: []ui.Action{ui.ApproveRun}},
	}
	for _, tc := range []struct {
		name   string
		action ui.Action
		pb     string
		want   bool
	}{
		{"a scoped grant on a matching playbook", ui.StartRun, "nks-upgrade", true},
		{"a scoped grant on another playbook", ui.StartRun, "notice-digest", false},
		{"a scoped grant on no playbook", ui.StartRun, "", false},
		{"an unscoped grant on any playbook", ui.ApproveRun, "notice-digest", true},
		{"an action no grant names", ui.CancelRun, "nks-upgrade", false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, p.Allows(tc.action, tc.pb)) })
	}
	assert.False(t, ui.Grants{}.AllowsAny(ui.StartRun))
	assert.True(t, ui.AllPermissions().Allows(ui.Reload, ""))
}

var canCall = regexp.MustCompile(`\.Can "([^"]+)"`)

// Every action a template asks about is one the UI knows: a typo would
// hide a control from everyone.
func TestTemplatesAskAboutKnownActions(t *testing.T) {
	files, err := filepath.Glob("templates/*.html")
	require.NoError(t, err)
	known := map[string]bool{}
	for _, a := range ui.Actions {
		known[string(a)] = true
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range canCall.FindAllStringSubmatch(string(b), -1) {
			seen++
			assert.True(t, known[m[1]], "%s asks about unknown action %q", f, m[1])
		}
	}
	assert.Greater(t, seen, 5)
}

// A session asks for its identity again every minute: a change of roles
// shows, and a revoked token ends the session.
func TestASessionFollowsItsTokensRoles(t *testing.T) {
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook})
	var mu sync.Mutex
	now := time.Now()
	var perms ui.Permissions = ui.AllPermissions()
	revoked := false
	web, err := ui.New(ui.Options{API: e.srv.Handler(), Sessions: e.store,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Identify: func(_ context.Context, tok string) (ui.Identity, error) {
			mu.Lock()
			defer mu.Unlock()
			if tok != token || revoked {
				return ui.Identity{}, ui.ErrBadToken
			}
			return ui.Identity{Name: "rita", Perms: perms}, nil
		},
		// A session keeps the token's hash, never the token.
		Recheck: func(_ context.Context, src ui.Source) (ui.Identity, error) {
			mu.Lock()
			defer mu.Unlock()
			if src.Kind != ui.SourceToken || src.TokenHash != auth.HashToken(token) || revoked {
				return ui.Identity{}, ui.ErrBadToken
			}
			return ui.Identity{Name: "rita", Perms: perms}, nil
		}})
	require.NoError(t, err)
	hs := httptest.NewServer(web)
	t.Cleanup(hs.Close)
	c := newClient(t, e.srv, hs.URL)
	require.Equal(t, http.StatusSeeOther, c.login(token, "").status)
	assert.Contains(t, c.get("/playbooks/demo").body, `action="/playbooks/demo/runs"`)

	mu.Lock()
	perms = ui.Grants{}
	mu.Unlock()
	assert.Contains(t, c.get("/playbooks/demo").body, `action="/playbooks/demo/runs"`, "within the minute, the session keeps what it knew")
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	assert.NotContains(t, c.get("/playbooks/demo").body, `action="/playbooks/demo/runs"`, "the role taken away shows")

	mu.Lock()
	revoked, now = true, now.Add(2*time.Minute)
	mu.Unlock()
	p := c.get("/playbooks/demo")
	assert.Equal(t, http.StatusSeeOther, p.status)
	assert.Contains(t, p.location, "/login")
}
