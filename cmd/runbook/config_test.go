package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const webhookPlaybook = `version: 1
name: on-mail
triggers:
  - webhook: {route: mail}
steps:
  - id: a
    uses: log
    with: {message: got mail}
`

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "pb"), 0o755))
	c.file("pb/hello.yaml", helloPlaybook)
	c.file("pb/breaks.yml", failingPlaybook)
	c.file("pb/README.md", "not a playbook")
	c.file("runbook.yaml", `playbooks: pb
server: {listen: "127.0.0.1:9999"}
webhooks:
  routes:
    sms: {secret: SMS_SECRET}
`)

	t.Run("a valid config and its playbooks print a one-line summary", func(t *testing.T) {
		withSecrets := *c
		withSecrets.env = append(slices.Clone(c.env), "SMS_SECRET=s3cret", "RUNBOOK_API_TOKEN=tok")
		r := withSecrets.run("config", "check")
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, "ok  runbook.yaml: playbooks pb (2 playbooks), 1 route, listen 127.0.0.1:9999\n", r.stdout)
		assert.Empty(t, r.stderr)
	})
	t.Run("an unset secret is a warning, not a failure", func(t *testing.T) {
		r := c.run("config", "check", "runbook.yaml")
		assert.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "ok  runbook.yaml")
		assert.Contains(t, r.stderr, "warning: secret SMS_SECRET (used by runbook.yaml) is not set")
		assert.Contains(t, r.stderr, "warning: secret RUNBOOK_API_TOKEN (used by runbook.yaml) is not set")
		assert.NotContains(t, r.stderr, "s3cret")
	})
	t.Run("every problem of the config is printed with its position", func(t *testing.T) {
		bad := c.file("bad.yaml", `playbooks: pb
server:
  listen: "127.0.0.1:99999"
  max_body: 1GiB
webhooks:
  routes:
    sms: {}
connections:
  nsk: {token: "Bearer ${{ secrets.T }}"}
`)
		r := c.run("config", "check", bad)
		assert.Equal(t, 2, r.code, r)
		assert.Empty(t, r.stdout)
		assert.Equal(t, bad+`:3:11: server.listen: invalid port "99999": must be a number between 0 and 65535
`+bad+`:4:13: server.max_body: must be between 1B and 16MiB (got 1GiB)
`+bad+`:7:10: webhooks.routes.sms: secret is required (the name of the secret holding the webhook signature)
`+bad+`:9:3: connections.nsk: unknown connection "nsk"; did you mean "nks"?
`+bad+`:9:16: connections.nsk.token: only ${{ secrets.NAME }} is allowed in the config (got "Bearer ${{ secrets.T }}")
config `+bad+` is invalid
Try: see docs/config.md for every field and its default
`, r.stderr)
	})
	t.Run("an invalid playbook in the directory fails the check", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "pb2"), 0o755))
		c.file("pb2/hello.yaml", helloPlaybook)
		c.file("pb2/typo.yaml", "version: 1\nname: typo\nsteps:\n  - id: a\n    uses: lgo\n")
		cfg := c.file("two.yaml", "playbooks: pb2\n")
		r := c.run("config", "check", cfg)
		assert.Equal(t, 2, r.code, r)
		assert.Empty(t, r.stdout)
		assert.Regexp(t, `(?m)^pb2/typo.yaml:5:11: steps\[0\]\.uses: .*lgo`, r.stderr)
		assert.Contains(t, r.stderr, "1 playbook is invalid")
	})
	t.Run("a webhook trigger on a route the config does not serve is a warning", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "pb3"), 0o755))
		c.file("pb3/mail.yaml", webhookPlaybook)
		cfg := c.file("three.yaml", "playbooks: pb3\n")
		r := c.run("config", "check", cfg)
		assert.Equal(t, 0, r.code, r)
		assert.Regexp(t, `warning: pb3/mail.yaml:4:\d+: webhook route "mail" is not in webhooks.routes`, r.stderr)
	})
	t.Run("each: hook on a Standard Webhooks route is a warning", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "pb5"), 0o755))
		c.file("pb5/per-hook.yaml", strings.Replace(webhookPlaybook, "{route: mail}", "{route: mail, each: hook}", 1))
		c.file("pb5/per-delivery.yaml", strings.Replace(strings.Replace(webhookPlaybook, "on-mail", "on-mail-2", 1), "{route: mail}", "{route: events}", 1))
		cfg := c.file("five.yaml", "playbooks: pb5\nwebhooks:\n  routes:\n    mail: {verify: standard-webhooks, secret: MAIL_KEY}\n    events: {verify: standard-webhooks, secret: MAIL_KEY}\n")
		r := c.run("config", "check", cfg)
		assert.Equal(t, 0, r.code, r)
		assert.Regexp(t, `warning: pb5/per-hook.yaml:4:\d+: each: hook on route "mail", which \S*five.yaml verifies as standard-webhooks: such a delivery has no hooks`, r.stderr)
		assert.NotContains(t, r.stderr, "per-delivery.yaml", "a trigger without each: hook is fine there")
	})
	t.Run("a missing playbook directory is an error", func(t *testing.T) {
		cfg := c.file("four.yaml", "playbooks: nowhere\n")
		r := c.run("config", "check", cfg)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "playbook directory")
		assert.Contains(t, r.stderr, "nowhere")
	})
	t.Run("a missing config file is an error with a hint", func(t *testing.T) {
		r := c.run("config", "check", "nope.yaml")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "config file nope.yaml does not exist")
		assert.Contains(t, r.stderr, "Try: ")
	})
	t.Run("help lists the verb and its subcommand", func(t *testing.T) {
		r := c.run("help")
		assert.Regexp(t, `(?m)^  config +check the config file`, r.stdout)
		r = c.run("config", "-h")
		assert.Equal(t, 0, r.code, r)
		assert.Regexp(t, `(?m)^  check +validate a config file`, r.stdout)
	})
	t.Run("the shipped example checks out against the repo's playbooks", func(t *testing.T) {
		example, err := filepath.Abs("../../examples/config/runbook.yaml")
		require.NoError(t, err)
		r := c.run("config", "check", example)
		assert.Equal(t, 0, r.code, r)
		assert.Regexp(t, `^ok  .*examples/config/runbook.yaml: playbooks .*playbooks \(\d+ playbooks\), 1 route, listen 127.0.0.1:8088\n$`, r.stdout)
	})
}
