package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run that names a secret nobody set is refused with the secret's name,
// every place it is looked up, and a hint that says how to set it.
func TestAMissingSecretIsNamedWithWhereItIsLookedUp(t *testing.T) {
	c := newCLI(t)
	pb := c.file("secret.yaml", `version: 1
name: secretive
steps:
  - id: use
    uses: log
    with: {message: "token is ${{ secrets.DEPLOY_TOKEN }}"}
`)
	t.Run("without a secrets file", func(t *testing.T) {
		r := c.run("run", pb)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "secret DEPLOY_TOKEN is not set (looked up in the environment as RUNBOOK_SECRET_DEPLOY_TOKEN, "+
			"in a secrets file (none given: --secrets FILE or $RUNBOOK_SECRETS_FILE), then as DEPLOY_TOKEN in the environment)", r)
		assert.Contains(t, r.stderr, "Try: export RUNBOOK_SECRET_DEPLOY_TOKEN=… (or add DEPLOY_TOKEN to a secrets file given with --secrets FILE), then run again", r)
		assert.NotContains(t, r.stderr, "to see the inputs", "the hint is about the secret, not the inputs")
	})
	t.Run("with a secrets file that lacks it", func(t *testing.T) {
		file := c.file("secrets.yaml", "OTHER: x\n")
		r := c.run("run", pb, "--secrets", file)
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, `in the secrets file "`+file+`"`, r)
	})
}
