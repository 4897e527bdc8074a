package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/server"
)

// The agents page shows each connected agent: its name, labels,
// capacity, limits per playbook, version and the token it connected
// with.
func TestAgentsPageShowsTheConnectedAgents(t *testing.T) {
	const agentToken = "tok-agent-0000000000000000000000000000"
	e := startServer(t, map[string]string{"demo.yaml": demoPlaybook}, func(o *server.Options) {
		o.Auth.Users = append(o.Auth.Users, auth.User{Name: "bastion-1", Roles: []string{auth.RoleAgent}, TokenSHA256: auth.HashToken(agentToken)})
	})
	e.signedIn()
	p := e.get("/agents")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, "No agent is connected")

	body := `{"name":"bastion-1","labels":{"role":"bastion","zone":"kr1-a"},"capacity":4,"limits":[{"pattern":"heavy-*","max":1}],"version":"v9.9.9","key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`
	req, err := http.NewRequest("POST", e.url+"/api/v1/agent/register", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	p = e.get("/agents")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assertNoInlineCode(t, p.body)
	for _, want := range []string{"bastion-1", `<span class="tag">role=bastion</span>`, `<span class="tag">zone=kr1-a</span>`, "0/4", ">heavy-* 0/1</span>", "v9.9.9", `href="/agents" aria-current="page"`} {
		assert.Contains(t, p.body, want)
	}
}
