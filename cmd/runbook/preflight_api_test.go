package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run started through the API is checked against the service's limits
// before it is created, like `runbook run`: an unsupported version given
// as an input is answered 422 at its position, and nothing runs.
func TestTheAPIRefusesAnUnsupportedVersionFromAnInputBeforeTheRun(t *testing.T) {
	c := newCLI(t)
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	c.file("playbooks/upgrade.yaml", `version: 1
name: upgrade
inputs:
  version: {type: string, required: true}
steps:
  - id: up
    uses: nks.supports
  - id: gate
    uses: approval
    with:
      message: upgrade to ${{ inputs.version }}?
  - id: upgrade
    uses: nks.cluster.upgrade
    with: {cluster: prod, version: "${{ inputs.version }}"}
`)
	s := c.serve("--sim")
	code, body := s.api(t, "POST", "/api/v1/playbooks/upgrade/runs", map[string]any{"inputs": map[string]any{"version": "v1.10.0"}})
	assert.Equal(t, 422, code, body)
	assert.Equal(t, "invalid", body["code"], body)
	assert.Regexp(t, `upgrade\.yaml:14:27: steps\[2\]\.with\.version: .*v1\.10\.0 is not offered`, fmt.Sprint(body["problems"]))
	_, list := s.api(t, "GET", "/api/v1/runs", nil)
	require.Contains(t, list, "runs")
	assert.Empty(t, list["runs"], "no run was created")

	code, body = s.api(t, "POST", "/api/v1/playbooks/upgrade/runs", map[string]any{"inputs": map[string]any{"version": "v1.28.3"}})
	assert.Equal(t, 201, code, body)
	_, list = s.api(t, "GET", "/api/v1/runs", nil)
	assert.Len(t, list["runs"], 1)
	s.stop(t)
}
