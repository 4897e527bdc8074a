package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	simnet "github.com/runbook/runbook/internal/sim/network"
)

// The shipped create playbook runs on the simulator with only the inputs a
// user knows: the base image and the internet-gateway network and subnets
// are looked up, and the create carries their UUIDs.
func TestShippedCreatePlaybookLooksUpTheImageAndGatewayOnTheSimulator(t *testing.T) {
	c := newCLI(t)
	src, err := os.ReadFile("../../playbooks/nks-create-cluster.yaml")
	require.NoError(t, err)
	pb := c.file("nks-create-cluster.yaml", string(src))
	url := c.startSim("--speed", "3000")
	vpc := []string{"-i", "keypair=demo-key", "-i", "flavor_id=1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"-i", "fixed_network=a1b2c3d4-0000-4000-8000-000000000001", "-i", "fixed_subnet=a1b2c3d4-0000-4000-8000-000000000002"}

	r := c.run(append([]string{"run", "--sim-url", url, pb, "-i", "name=demo", "-i", "image=Rocky Linux 8.9"}, vpc...)...)
	require.Equal(t, 0, r.code, r)
	info, err := os.Stat(filepath.Join(c.dir, "kubeconfig", "demo.yaml"))
	require.NoError(t, err, r)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// A name the region does not offer fails before any create, naming the
	// images it does offer.
	r = c.run(append([]string{"run", "--sim-url", url, pb, "-i", "name=other", "-i", "image=Ubuntu 22.04"}, vpc...)...)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stdout+r.stderr, "Ubuntu Server 22.04.3 LTS", r)

	creates := simCreates(t, url)
	require.Len(t, creates, 1, "one create: the failed lookup stopped the second run")
	labels := creates[0]["labels"].(map[string]any)
	assert.Equal(t, "a1b2c3d4-0000-4000-8000-0000000000a1", labels["external_network_id"], "the router:external network")
	assert.Equal(t, "a1b2c3d4-0000-4000-8000-0000000000a2:a1b2c3d4-0000-4000-8000-0000000000a3", labels["external_subnet_id_list"])
	assert.Equal(t, simnet.ImageID("kr1", "Rocky Linux 8.9"), labels["node_image"], "the region's Rocky Linux image")
}

// simCreates returns the bodies of the cluster creates the simulator
// answered.
func simCreates(t *testing.T, url string) []map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/_sim/journal?service=nks&method=POST")
	require.NoError(t, err)
	defer resp.Body.Close()
	var calls []struct {
		Path, Body, Fault string
		Status            int
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&calls))
	var out []map[string]any
	for _, c := range calls {
		if c.Path == "/v1/clusters" && c.Fault == "" && c.Status/100 == 2 {
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.Body), &body))
			out = append(out, body)
		}
	}
	return out
}
