package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidate(t *testing.T) {
	c := newCLI(t)
	good := c.file("good.yaml", helloPlaybook)
	other := c.file("breaks.yaml", failingPlaybook)
	bad := c.file("bad.yaml", `version: 1
name: bad
steps:
  - id: a
    uses: log
    with: {message: hi}
  - id: b
    uses: lgo
  - id: c
    uses: sleep
    with: {duration: 1s, extra: true}
`)

	t.Run("valid files print ok with their step count", func(t *testing.T) {
		r := c.run("validate", good, other)
		assert.Equal(t, 0, r.code, r)
		assert.Equal(t, "ok  "+good+" (2 steps)\nok  "+other+" (3 steps)\n", r.stdout)
		assert.Empty(t, r.stderr)
	})
	t.Run("every diagnostic of an invalid file is printed with its position", func(t *testing.T) {
		r := c.run("validate", good, bad)
		assert.Equal(t, 2, r.code, r)
		assert.Equal(t, "ok  "+good+" (2 steps)\n", r.stdout)
		assert.Regexp(t, `(?m)^`+bad+`:8:\d+: .*lgo`, r.stderr)
		assert.Regexp(t, `(?m)^`+bad+`:11:\d+: .*extra`, r.stderr)
		assert.Contains(t, r.stderr, "1 file is invalid")
		assert.Contains(t, r.stderr, "Try: ")
	})
	t.Run("a missing file is an error", func(t *testing.T) {
		r := c.run("validate", "nope.yaml")
		assert.Equal(t, 2, r.code, r)
		assert.Contains(t, r.stderr, "nope.yaml")
	})
}
