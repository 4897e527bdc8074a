package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A version given as an input (-i or --inputs) is checked before the run
// starts like a literal one: no run is created and the service's message
// is printed once, at the param that reads the input.
func TestUnsupportedVersionFromAnInputIsRefusedBeforeTheRun(t *testing.T) {
	c := newCLI(t)
	url := c.startSim()
	pb := c.file("upgrade.yaml", `version: 1
name: upgrade
inputs:
  version:
    type: string
    required: true
steps:
  - id: up
    uses: nks.cluster.upgrade
    with:
      cluster: prod
      version: ${{ inputs.version }}
`)
	inputsFile := c.file("inputs.yaml", "version: v1.11.0\n")
	for _, tc := range []struct {
		name    string
		args    []string
		version string
	}{
		{"given with -i", []string{"-i", "version=v1.10.0"}, "v1.10.0"},
		{"given in an inputs file", []string{"--inputs", inputsFile}, "v1.11.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--sim-url", url, pb}, tc.args...)
			r := c.run(args...)
			assert.Equal(t, 2, r.code, r)
			assert.Regexp(t, `upgrade\.yaml:12:7: steps\[0\]\.with\.version: .*`+tc.version+` is not offered`, r.stderr)
			assert.Equal(t, 1, strings.Count(r.stdout+r.stderr, "is not offered"), "the message once: %s", r)
			assert.NotContains(t, r.stdout, "created", "no run was created")
		})
	}
	r := c.run("runs", "list")
	assert.NotContains(t, r.stdout, "upgrade", "nothing was recorded")

	// a supported version from an input passes the preflight and runs
	r = c.run("run", "--sim-url", url, pb, "-i", "version=v1.28.3")
	assert.NotContains(t, r.stderr, "is not offered", r)
	assert.Contains(t, r.stdout, "created", r)
}
