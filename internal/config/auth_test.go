package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/config"
)

const aliceHash = "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90"

func TestAuthSection(t *testing.T) {
	c, err := config.Parse("runbook.yaml", []byte(`
auth:
  users:
    - {name: alice, roles: [approver, viewer], token_sha256: `+aliceHash+`}
    - {name: ci, roles: [operator], playbooks: ["nks-*"], token_sha256: `+strings.Repeat("a", 64)+`}
  oidc:
    issuer: https://sso.example.com
    audience: runbook
    roles_claim: groups
    role_map: {ops-admins: [admin], ops: [operator, approver]}
  audit_retention: 90d
`))
	require.NoError(t, err)
	require.Len(t, c.Auth.Users, 2)
	assert.Equal(t, "alice", c.Auth.Users[0].Name)
	assert.Equal(t, []string{"approver", "viewer"}, c.Auth.Users[0].Roles)
	assert.Equal(t, []string{"nks-*"}, c.Auth.Users[1].Playbooks)
	require.NotNil(t, c.Auth.OIDC)
	assert.Equal(t, []string{"operator", "approver"}, c.Auth.OIDC.RoleMap["ops"])
	assert.Equal(t, 90*24*time.Hour, c.Auth.AuditRetention)
}

func TestAuthSectionProblems(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"an unknown role", `{users: [{name: a, roles: [boss], token_sha256: ` + aliceHash + `}]}`, `unknown role "boss"`},
		{"a token instead of its hash", `{users: [{name: a, roles: [viewer], token_sha256: secret}]}`, "64 lower-case hex digits"},
		{"no hash", `{users: [{name: a, roles: [viewer]}]}`, "token_sha256 is required"},
		{"a bad pattern", `{users: [{name: a, roles: [viewer], playbooks: ["[x"], token_sha256: ` + aliceHash + `}]}`, "playbook pattern"},
		{"oidc without audience", `{oidc: {issuer: https://x}}`, "issuer and audience are required"},
		{"an unknown key", `{userz: []}`, "userz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("runbook.yaml", []byte("auth: "+tc.src+"\n"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
