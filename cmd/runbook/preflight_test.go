package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An unsupported version is found before the run starts, against the live
// /v1/supports, and reported at its position like a load error.
func TestUnsupportedVersionIsRefusedBeforeTheRunWithItsPosition(t *testing.T) {
	c := newCLI(t)
	url := c.startSim()
	pb := c.file("upgrade.yaml", `version: 1
name: upgrade
steps:
  - id: up
    uses: nks.cluster.upgrade
    with:
      cluster: prod
      version: v1.10.0
`)
	r := c.run("run", "--sim-url", url, pb)
	assert.Equal(t, 2, r.code, r)
	assert.Regexp(t, `upgrade\.yaml:8:7: steps\[0\]\.with\.version: .*v1\.10\.0`, r.stderr)
	assert.NotContains(t, r.stdout, "run ", "no run was created")

	resp, err := http.Get(url + "/_sim/journal?service=nks")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var calls []struct{ Method, Path string }
	require.NoError(t, json.Unmarshal(body, &calls))
	for _, call := range calls {
		assert.Equal(t, "GET", call.Method, "only reads before the run: %s %s", call.Method, call.Path)
	}
	r = c.run("runs", "list")
	assert.NotContains(t, r.stdout, "upgrade", "nothing was recorded")
}
