package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A misspelt -i name is refused with the declared name it probably meant.
func TestAMisspeltInputNameSuggestsTheDeclaredOne(t *testing.T) {
	c := newCLI(t)
	pb := c.file("hello.yaml", helloPlaybook)
	r := c.run("run", pb, "-i", "woh=ann")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `unknown input "woh" (inputs: who, times); did you mean "who"?`, r)
	assert.NotContains(t, r.stdout, "created", "no run was created")
}
