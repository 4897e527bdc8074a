package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/auth"
)

// as runs `runbook args...` with the caller's own token in
// $RUNBOOK_API_TOKEN.
func (c *cli) as(token string, args ...string) result {
	c.t.Helper()
	return c.withEnv("RUNBOOK_API_TOKEN=" + token).run(args...)
}

// withEnv is c with more environment variables (a later one wins).
func (c *cli) withEnv(kv ...string) *cli {
	v := *c
	v.env = append(slices.Clone(c.env), kv...)
	return &v
}

// createdToken checks the output of `runbook token create` and returns the
// token: alone on the last line, and nowhere else.
func createdToken(t *testing.T, r result) string {
	t.Helper()
	require.Equal(t, 0, r.code, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	secret := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(secret, auth.TokenPrefix), "the last line is the token:\n%s", r)
	assert.NotContains(t, strings.Join(lines[:len(lines)-1], "\n"), secret)
	assert.NotContains(t, r.stderr, secret)
	return secret
}

// auditLines returns the lines of `runbook audit` (without its header).
func (c *cli) auditLines(t *testing.T) []string {
	t.Helper()
	r := c.run("audit")
	require.Equal(t, 0, r.code, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Regexp(t, `^TIME +IDENTITY +ACTION +TARGET +RESULT +SOURCE$`, lines[0])
	return lines[1:]
}

// indexOf returns the index of the first line holding every part, -1 when
// there is none.
func indexOf(lines []string, parts ...string) int {
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 3 && !slices.ContainsFunc(parts, func(p string) bool { return !slices.Contains(f, p) }) {
			return i
		}
	}
	return -1
}

func TestTokensThroughTheServerGiveRolesAndAreAudited(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePlaybooks(t)
	s := c.serveRuns(t, "-v") // the CLI has the server's (admin) token; -v logs every call and run
	id := c.startGated(t, s)

	secret := createdToken(t, c.run("token", "create", "ro", "--role", "viewer"))

	t.Run("a viewer token lists runs", func(t *testing.T) {
		r := c.as(secret, "runs", "list")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, id)
	})
	t.Run("RUNBOOK_TOKEN, the old name, is still read first, with a warning", func(t *testing.T) {
		r := c.withEnv("RUNBOOK_TOKEN="+secret).run("runs", "cancel", id)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "ro may not runs.cancel", "the viewer's token was sent, not the server's")
		assert.Contains(t, r.stderr, "warning: $RUNBOOK_TOKEN is deprecated: set RUNBOOK_API_TOKEN to the token instead")
		r = c.as(secret, "runs", "list")
		assert.NotContains(t, r.stderr, "deprecated", "the one name says nothing")
	})
	t.Run("a viewer token may not cancel: 403 names the permission", func(t *testing.T) {
		r := c.as(secret, "runs", "cancel", id)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "ro may not runs.cancel: the permission runs.cancel is needed")
		assert.Contains(t, c.run("runs", "show", id).stdout, "waiting for approval", "the run goes on")
	})
	t.Run("a viewer token may not manage tokens nor read the audit log", func(t *testing.T) {
		r := c.as(secret, "token", "create", "other", "--role", "admin")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "the permission tokens.manage is needed")
		assert.Contains(t, r.stderr, "Try: use an admin token")
		r = c.as(secret, "audit")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "the permission audit.read is needed")
	})
	t.Run("a name taken by a live token is refused by the server", func(t *testing.T) {
		r := c.run("token", "create", "ro", "--role", "operator")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "a token named ro exists")
	})
	t.Run("the list shows the token without secret material", func(t *testing.T) {
		r := c.run("token", "list")
		require.Equal(t, 0, r.code, r)
		assert.Regexp(t, `(?m)^ro +viewer +- +\S+ \S+ +server-token +never +(never|\S+ \S+) +live$`, r.stdout)
		r = c.run("token", "list", "--output", "json")
		require.Equal(t, 0, r.code, r)
		var toks []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &toks), r.stdout)
		require.Len(t, toks, 1)
		assert.Equal(t, "ro", toks[0]["name"])
		assert.NotContains(t, toks[0], "hash")
		assert.NotContains(t, toks[0], "token")
		for _, out := range []string{r.stdout, c.run("token", "list").stdout} {
			assert.NotContains(t, out, secret)
			assert.NotContains(t, out, auth.HashToken(secret))
		}
	})
	t.Run("a revoked token is refused with 401", func(t *testing.T) {
		r := c.run("token", "revoke", "ro")
		require.Equal(t, 0, r.code, r)
		assert.Equal(t, "token ro revoked\n", r.stdout)
		r = c.as(secret, "runs", "list")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "refused the API token: invalid bearer token")
		assert.Contains(t, r.stderr, "Try: set RUNBOOK_API_TOKEN to your token", "the hint names the one token variable")
		assert.Regexp(t, `(?m)^ro .* revoked \S+ \S+ by server-token$`, c.run("token", "list").stdout)
		r = c.run("token", "revoke", "ro")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, `no live token "ro"`)
	})
	t.Run("the audit log shows who created, was denied and revoked, newest first", func(t *testing.T) {
		lines := c.auditLines(t)
		created := indexOf(lines, "server-token", "token.create", "token:ro", "ok")
		// The server leaves a refused request's target out (its path values
		// are not read before the route runs): the identity, action and
		// result are what is checked here.
		denied := indexOf(lines, "ro", "run.cancel", "denied")
		revoked := indexOf(lines, "server-token", "token.revoke", "token:ro", "ok")
		require.True(t, created >= 0 && denied >= 0 && revoked >= 0, "%s", strings.Join(lines, "\n"))
		assert.Less(t, revoked, denied)
		assert.Less(t, denied, created)
		assert.GreaterOrEqual(t, indexOf(lines, "ro", "token.create", "denied"), 0)
		assert.Regexp(t, `127\.0\.0\.1:\d+$`, lines[denied], "the source address")

		r := c.run("audit", "--limit", "1", "--output", "json")
		require.Equal(t, 0, r.code, r)
		var recs []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs), r.stdout)
		require.Len(t, recs, 1)
		assert.Equal(t, "token.revoke", recs[0]["action"], "the newest")
		assert.Equal(t, "server-token", recs[0]["identity"])
	})

	s.stop(t)
	logs := s.stderr.String()
	require.NotEmpty(t, logs, "serve -v logged")
	assert.NotContains(t, logs, strings.TrimPrefix(secret, auth.TokenPrefix), "the log never holds the token")
	assert.NotContains(t, logs, auth.HashToken(secret), "nor its hash")
	data, err := os.ReadFile(c.state)
	require.NoError(t, err)
	assert.NotContains(t, string(data), secret, "the state file never holds the token")
	assert.NotContains(t, string(data), strings.TrimPrefix(secret, auth.TokenPrefix))

	t.Run("without the server the verbs read the state file", func(t *testing.T) {
		r := c.run("token", "list")
		require.Equal(t, 0, r.code, r)
		assert.Regexp(t, `(?m)^ro .* revoked .* by server-token$`, r.stdout)
		assert.GreaterOrEqual(t, indexOf(c.auditLines(t), "ro", "run.cancel", "denied"), 0)
	})
}

func TestTokensWithoutAServerChangeTheStateAndTheServerHonoursThem(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePlaybooks(t)
	secret := createdToken(t, c.run("token", "create", "ci", "--role", "operator", "--playbooks", "flaky,nks-*"))

	r := c.run("token", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `(?m)^ci +operator +flaky,nks-\* +\S+ \S+ +local:tester +never +never +live$`, r.stdout)
	lines := c.auditLines(t)
	assert.Equal(t, 0, indexOf(lines, "local:tester", "token.create", "token:ci", "ok", "local"), strings.Join(lines, "\n"))

	s := c.serveRuns(t)
	t.Run("the server knows the token and its playbook scope", func(t *testing.T) {
		code, _ := s.api(t, "POST", "/api/v1/playbooks/gated/runs", map[string]any{})
		require.Equal(t, 201, code)
		r := c.as(secret, "runs", "list")
		require.Equal(t, 0, r.code, r)
		assert.NotContains(t, r.stdout, "gated", "a run of a playbook out of scope is not listed")
	})
	t.Run("a token revoked in the state file is refused by the next server", func(t *testing.T) {
		s.stop(t)
		r := c.run("token", "revoke", "ci")
		require.Equal(t, 0, r.code, r)
		s = c.serveRuns(t)
		r = c.as(secret, "runs", "list")
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stderr, "invalid bearer token")
	})
}

// TestATokenWithATTLShowsItsExpiryAndLastUse: token create --ttl sets an
// expiry that token list shows, with the token's last use once a server
// accepted it.
func TestATokenWithATTLShowsItsExpiryAndLastUse(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePlaybooks(t)
	r := c.run("token", "create", "ci", "--role", "viewer", "--ttl", "90d")
	require.Equal(t, 0, r.code, r)
	secret := createdToken(t, r)
	until := time.Now().Add(90 * 24 * time.Hour)
	assert.Contains(t, r.stdout, "until "+until.Format("2006-01-02"))

	r = c.run("token", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `(?m)^NAME +ROLES +PLAYBOOKS +CREATED +BY +EXPIRES +LAST USED +STATUS$`, r.stdout)
	assert.Regexp(t, `(?m)^ci +viewer +- +\S+ \S+ +local:tester +`+until.Format("2006-01-02")+` \S+ +never +live$`, r.stdout)

	s := c.serveRuns(t)
	r = c.as(secret, "runs", "list")
	require.Equal(t, 0, r.code, r)
	require.Eventually(t, func() bool {
		_, body := s.api(t, "GET", "/api/v1/tokens", nil)
		for _, tk := range body["tokens"].([]any) {
			if m := tk.(map[string]any); m["name"] == "ci" && m["last_used_at"] != nil {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the server did not record the token's use")
	s.stop(t)
	r = c.run("token", "list")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `(?m)^ci +viewer +- +\S+ \S+ +local:tester +\S+ \S+ +\S+ \S+ +live$`, r.stdout)
	assert.NotRegexp(t, `(?m)^ci .* never +live$`, r.stdout)
}

func TestTokenUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"an unknown role suggests the closest", []string{"token", "create", "x", "--role", "operater"}, `unknown role "operater" (want admin, agent, approver, operator, viewer); did you mean "operator"?`},
		{"a role is required", []string{"token", "create", "x"}, "--role is required"},
		{"a bad playbook pattern is refused", []string{"token", "create", "x", "--role", "viewer", "--playbooks", "nks-["}, `playbook pattern "nks-[": syntax error in pattern`},
		{"a name with a colon is refused", []string{"token", "create", "a:b", "--role", "viewer"}, `invalid name "a:b"`},
		{"a name is required", []string{"token", "create", "--role", "viewer"}, "missing the token NAME"},
		{"an unknown token command suggests the closest", []string{"token", "revok", "x"}, `did you mean "revoke"`},
		{"a bad --since is refused", []string{"audit", "--since", "yesterday"}, "want a duration (30m, 24h, 7d)"},
		{"a bad --ttl is refused", []string{"token", "create", "x", "--role", "viewer", "--ttl", "soon"}, `--ttl: invalid duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(tt.args...)
			assert.Equal(t, 2, r.code, r)
			assert.Contains(t, r.stderr, tt.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	_, err := os.Stat(c.state)
	assert.True(t, os.IsNotExist(err), "a refused command creates no state")
}

func TestTokensLiveInAPostgresState(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	onDatabase(t, c)
	secret := createdToken(t, c.run("token", "create", "ci", "--role", "approver"))
	r := c.run("token", "list", "--output", "json")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, `"name": "ci"`)
	assert.NotContains(t, r.stdout, secret)
	require.Equal(t, 0, c.run("token", "revoke", "ci").code)
	lines := c.auditLines(t)
	require.Len(t, lines, 2, strings.Join(lines, "\n"))
	assert.Equal(t, 0, indexOf(lines, "local:tester", "token.revoke", "token:ci", "ok"), strings.Join(lines, "\n"))
	assert.Equal(t, 1, indexOf(lines, "local:tester", "token.create", "token:ci", "ok"), strings.Join(lines, "\n"))
}
