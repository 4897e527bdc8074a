package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSimAt runs `runbook sim` at a clock speed with the given task
// durations (simulated) and returns its URL. It outlives the runs killed
// in a test, as a real cloud would.
func (c *cli) startSimAt(speed string, durations map[string]string) string {
	c.t.Helper()
	url := c.startSim("--speed", speed, "--services", "identity,nks")
	body, err := json.Marshal(durations)
	require.NoError(c.t, err)
	resp, err := http.Post(url+"/nks/_admin/durations", "application/json", strings.NewReader(string(body)))
	require.NoError(c.t, err)
	resp.Body.Close()
	require.Equal(c.t, http.StatusNoContent, resp.StatusCode)
	return url
}

// nksPosts returns the paths of the POSTs the simulator's cluster API
// answered (injected faults excluded), in order.
func nksPosts(t *testing.T, url string) []string {
	t.Helper()
	return simPosts(t, url, "nks")
}

// killWhen kills cmd with SIGKILL as soon as the simulator has answered a
// POST whose path matches, and waits for it to die.
func killWhen(t *testing.T, cmd *exec.Cmd, url string, path *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hit := false
		for _, p := range nksPosts(t, url) {
			hit = hit || path.MatchString(p)
		}
		if hit {
			break
		}
		require.True(t, time.Now().Before(deadline), "no POST matching %s within 10s", path)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // inside the wait, with its checkpoint written
	require.NoError(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()
}

const nksCreateWith = `
      keypair: demo-key
      node_count: 2
      flavor_id: 1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01
      fixed_network: a1b2c3d4-0000-4000-8000-000000000001
      fixed_subnet: a1b2c3d4-0000-4000-8000-000000000002
      labels: {kube_tag: v1.29.3, availability_zone: kr-pub-a, node_image: 6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11, boot_volume_type: General SSD, boot_volume_size: 50}
      wait: true`

const nksUpgradeBook = `
version: 1
name: nks-upgrade-crash
steps:
  - id: create
    uses: nks.cluster.create
    with:
      name: prod` + nksCreateWith + `
  - id: pool
    uses: nks.nodegroup.create
    with:
      cluster: prod
      name: pool-b
      flavor_id: 1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01
      image_id: 6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11
      labels: {availability_zone: kr-pub-b, boot_volume_type: General SSD, boot_volume_size: 50}
      wait: true
  - id: upgrade
    uses: nks.cluster.upgrade
    with: {cluster: prod, version: v1.30.3}
`

// TestKilledUpgradeResumesWithOneUpgradePerNodeGroup kills the real binary
// with SIGKILL while nks.cluster.upgrade waits for a worker group (the
// master already upgraded), resumes the run against the same simulator,
// and reads its journal: exactly one upgrade POST per node group.
func TestKilledUpgradeResumesWithOneUpgradePerNodeGroup(t *testing.T) {
	c := newCLI(t)
	// 100x: a create takes 0.3 s, an upgrade 0.9 s of real time.
	url := c.startSimAt("100", map[string]string{"CLUSTER_CREATE": "30s", "NODEGROUP_CREATE": "30s", "NODEGROUP_UPGRADE": "90s"})
	pb := c.file("upgrade.yaml", nksUpgradeBook)
	cmd, id := c.startUntil("step upgrade started", "run", "--sim-url", url, pb)
	require.NotEmpty(t, id)
	killWhen(t, cmd, url, regexp.MustCompile(`/nodegroups/default-worker/upgrade$`))
	upgrades := func() map[string]int {
		n := map[string]int{}
		for _, p := range nksPosts(t, url) {
			if m := regexp.MustCompile(`/nodegroups/([^/]+)/upgrade$`).FindStringSubmatch(p); m != nil {
				n[m[1]]++
			}
		}
		return n
	}
	require.Equal(t, map[string]int{"default-master": 1, "default-worker": 1}, upgrades(), "killed while default-worker upgrades")

	r := c.run("run", "--resume", id, "--sim-url", url)
	require.Equal(t, 0, r.code, r)
	assert.Equal(t, map[string]int{"default-master": 1, "default-worker": 1, "pool-b": 1}, upgrades(),
		"exactly one upgrade call per node group")
	assert.Contains(t, r.stdout, "step upgrade succeeded")
}

const nksCreateBook = `
version: 1
name: nks-create-crash
steps:
  - id: create
    uses: nks.cluster.create
    with:
      name: prod` + nksCreateWith + `
  - id: kubeconfig
    uses: nks.cluster.kubeconfig
    with: {cluster: "${{ steps.create.outputs.uuid }}", file: out/prod.yaml}
`

// TestKilledCreateResumesWithOneCreate kills the real binary while the
// cluster create waits for its task, resumes it, and reads the journal:
// exactly one POST /v1/clusters, and the resumed run finishes the wait.
func TestKilledCreateResumesWithOneCreate(t *testing.T) {
	c := newCLI(t)
	url := c.startSimAt("100", map[string]string{"CLUSTER_CREATE": "300s"}) // 3 s of real time
	pb := c.file("create.yaml", nksCreateBook)
	cmd, id := c.startUntil("step create started", "run", "--sim-url", url, pb)
	require.NotEmpty(t, id)
	killWhen(t, cmd, url, regexp.MustCompile(`^/v1/clusters$`))

	r := c.run("run", "--resume", id, "--sim-url", url)
	require.Equal(t, 0, r.code, r)
	creates := 0
	for _, p := range nksPosts(t, url) {
		if p == "/v1/clusters" {
			creates++
		}
	}
	assert.Equal(t, 1, creates, "exactly one create call")
	info, err := os.Stat(c.dir + "/out/prod.yaml")
	require.NoError(t, err, r)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}
