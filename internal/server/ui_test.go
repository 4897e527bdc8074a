package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/ui"
)

// browser is a client of the web UI with a cookie jar.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (e *env) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: e.url, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) send(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(body)
}

var csrfValue = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs in with tok and returns the status of the answer.
func (b *browser) signIn(tok string) int {
	b.t.Helper()
	_, page := b.send(http.MethodGet, "/login", nil)
	m := csrfValue.FindStringSubmatch(page)
	require.NotNil(b.t, m, page)
	status, _ := b.send(http.MethodPost, "/login", url.Values{"csrf": {m[1]}, "token": {tok}})
	return status
}

// page gets a page that must answer 200.
func (b *browser) page(path string) string {
	b.t.Helper()
	status, body := b.send(http.MethodGet, path, nil)
	require.Equal(b.t, http.StatusOK, status, "%s: %s", path, body)
	return body
}

// The UI offers each identity what its roles allow, as the API judges
// them: by role, by playbook pattern and by label.
func TestTheUIOffersWhatEachRoleMayDo(t *testing.T) {
	ml := strings.Replace(approvalPlaybook, "name: gate", "name: tune\nlabels: {team: ml-platform}", 1)
	e := newEnv(t, map[string]string{"gate.yaml": approvalPlaybook, "tune.yaml": ml}, withPeople)
	waiting := e.newRun()
	start := `action="/playbooks/gate/runs"`
	startML := `action="/playbooks/tune/runs"`
	approve := `action="/runs/` + waiting + `/approve"`
	cancel := `action="/runs/` + waiting + `/cancel"`
	reload := `action="/playbooks/reload"`

	for _, tc := range []struct {
		who           string
		offers, hides []string
	}{
		{"vera", nil, []string{start, startML, approve, cancel, reload}},
		{"alice", []string{approve}, []string{start, cancel, reload}},
		{"otto", []string{start, startML, cancel}, []string{approve, reload}},
		{"mlop", []string{startML}, []string{start, approve, cancel, reload}},
		{"root", []string{start, startML, approve, cancel, reload}, nil},
	} {
		t.Run(tc.who, func(t *testing.T) {
			b := e.browser(t)
			require.Equal(t, http.StatusSeeOther, b.signIn(people[tc.who].token))
			var pages string
			for _, path := range []string{"/playbooks/gate", "/playbooks/tune", "/runs/" + waiting, "/playbooks"} {
				status, body := b.send(http.MethodGet, path, nil)
				if tc.who == "mlop" && (path == "/playbooks/gate" || path == "/runs/"+waiting) {
					assert.Equal(t, http.StatusForbidden, status, "%s is out of mlop's scope", path)
					continue
				}
				require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
				pages += body
			}
			for _, o := range tc.offers {
				assert.Contains(t, pages, o)
			}
			for _, h := range tc.hides {
				assert.NotContains(t, pages, h)
			}
		})
	}

	t.Run("an approval is answered under the signed-in name", func(t *testing.T) {
		b := e.browser(t)
		require.Equal(t, http.StatusSeeOther, b.signIn(people["alice"].token))
		tok := csrfValue.FindStringSubmatch(b.page("/runs/" + waiting))[1]
		status, body := b.send(http.MethodPost, "/runs/"+waiting+"/approve", url.Values{"csrf": {tok}, "step": {"ok"}, "decision": {"approve"}})
		require.Equal(t, http.StatusSeeOther, status, body)
		e.waitStep(waiting, "ok", "succeeded")
		assert.Contains(t, b.page("/runs/"+waiting), "approved by alice")
	})

	t.Run("a token the API refuses does not sign in", func(t *testing.T) {
		b := e.browser(t)
		assert.Equal(t, http.StatusUnauthorized, b.signIn("tok-nobody-00000000000000000000000000000"))
	})
}

// The UI's actions are named as the API's permissions, so that the
// server judges them with its own rules.
func TestUIActionsAreAPIPermissions(t *testing.T) {
	for _, a := range ui.Actions {
		found := false
		for _, perms := range auth.RolePermissions {
			found = found || slices.Contains(perms, auth.Permission(a))
		}
		assert.True(t, found, "ui action %s is no permission of any role", a)
	}
}

// A caller limited to some playbooks sees the deliveries, but only the
// runs of its playbooks in them.
func TestDeliveriesNameOnlyTheRunsInScope(t *testing.T) {
	e := newEnv(t, map[string]string{"hook.yaml": hookPlaybook}, withPeople)
	req, err := http.NewRequest("POST", e.url+"/hooks/sms", strings.NewReader(unsubscribeBody))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Cloud-Webhook-Signature", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	for who, want := range map[string]int{"vera": 1, "nksop": 0} {
		r := e.as(who, "GET", "/api/v1/deliveries", nil)
		require.Equal(t, 200, r.status, "%s", r.body)
		var list api.DeliveryList
		require.NoError(t, json.Unmarshal(r.body, &list))
		require.Len(t, list.Deliveries, 1, who)
		assert.Len(t, list.Deliveries[0].Runs, want, who)
	}
}
