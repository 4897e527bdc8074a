package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunTakesTheConnectionsAndHTTPPolicyOfRunbookYaml: the playbook
// runbook init writes calls NKS; with the nks connection set in the
// runbook.yaml init wrote (its credentials as secrets), runbook run
// reaches the service without --sim, and the config's http policy holds
// for its requests.
func TestRunTakesTheConnectionsAndHTTPPolicyOfRunbookYaml(t *testing.T) {
	c := newCLI(t)
	url := c.startSim()
	resp, err := http.Get(url + "/_sim/connections")
	require.NoError(t, err)
	var conns map[string]map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&conns))
	resp.Body.Close()
	nks := conns["nks"]
	require.NotEmpty(t, nks["token"])

	require.Equal(t, 0, c.run("init").code)
	pb := filepath.Join("playbooks", "hello.yaml")
	r := c.run("run", pb)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout+r.stderr, `connection "nks" is not configured: add it under `+"`connections:`"+` in runbook.yaml`)

	cfg, err := os.ReadFile(filepath.Join(c.dir, "runbook.yaml"))
	require.NoError(t, err)
	var conn strings.Builder
	fmt.Fprintf(&conn, "\nconnections:\n  nks:\n")
	for _, k := range []string{"base_url", "identity_url", "region", "tenant_id", "username"} {
		fmt.Fprintf(&conn, "    %s: %q\n", k, nks[k])
	}
	conn.WriteString("    token: ${{ secrets.NKS_TOKEN }}\n    password: ${{ secrets.NKS_PASSWORD }}\n")
	c.file("runbook.yaml", string(cfg)+conn.String())

	r = c.run("run", pb, "-i", "who=ops")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, "connections.nks.password: secret NKS_PASSWORD is not set")
	assert.Contains(t, r.stderr, "connections.nks.token: secret NKS_TOKEN is not set")

	c.env = append(c.env, "NKS_TOKEN="+nks["token"], "NKS_PASSWORD="+nks["password"])
	r = c.run("run", pb, "-i", "who=ops")
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `report: \d+ clusters`, r.stdout)
	assert.NotContains(t, r.stdout+r.stderr, nks["token"])

	t.Run("runs approve goes on with the config's connections", func(t *testing.T) {
		gated := c.file("gated-list.yaml", `version: 1
name: gated-list
steps:
  - {id: gate, uses: approval, with: {message: list?}}
  - {id: clusters, uses: nks.cluster.list}
`)
		r := c.run("run", gated)
		require.Equal(t, 0, r.code, r)
		id := runIDOf(t, r.stdout)
		r = c.run("runs", "approve", id, "gate")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "step clusters succeeded")
	})

	t.Run("runbook call takes the config's connections too", func(t *testing.T) {
		r := c.run("call", "nks.cluster.list", "--output", "text")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "clusters")
		assert.NotContains(t, r.stdout+r.stderr, nks["token"])
	})

	t.Run("--config names another file", func(t *testing.T) {
		other := c.file("elsewhere.yaml", string(cfg)+conn.String())
		require.NoError(t, os.Remove(filepath.Join(c.dir, "runbook.yaml")))
		r := c.run("run", pb, "--config", other)
		require.Equal(t, 0, r.code, r)
		r = c.run("call", "nks.cluster.list", "--config", other)
		require.Equal(t, 0, r.code, r)
	})

	t.Run("the config's http policy holds for the run's requests", func(t *testing.T) {
		c.file("runbook.yaml", string(cfg)+"\nhttp:\n  deny: [127.0.0.0/8]\n")
		probe := c.file("probe.yaml", `version: 1
name: probe
steps:
  - {id: get, uses: http.request, with: {url: "`+url+`/_sim/connections"}}
`)
		r := c.run("run", probe)
		assert.Equal(t, 1, r.code, r)
		assert.Contains(t, r.stdout, "127.0.0.0/8", "the refusal names the entry")
	})
}
