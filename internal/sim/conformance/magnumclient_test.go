package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
	"github.com/runbook/runbook/internal/sim/nks"
)

// python returns an interpreter that imports magnumclient and
// keystoneauth1: $RUNBOOK_PYTHON, python3 on the PATH, or Debian's
// /usr/bin/python3 (where python3-magnumclient installs). Without one the
// test is skipped, except under CI=true, where it fails: .ci/run installs
// the package.
func python(t *testing.T) string {
	t.Helper()
	var candidates []string
	if p := os.Getenv("RUNBOOK_PYTHON"); p != "" {
		candidates = append(candidates, p)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/bin/python3")
	for _, p := range candidates {
		if exec.Command(p, "-c", "import magnumclient.v1.client, keystoneauth1.identity.v2").Run() == nil {
			return p
		}
	}
	msg := "no python3 that imports magnumclient (tried " + strings.Join(candidates, ", ") + "): apt-get install python3-magnumclient"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// runMagnum runs testdata/magnum.py in a mode and decodes what it printed.
func runMagnum(t *testing.T, py string, s *sim.Server, mode, cluster string) map[string]any {
	t.Helper()
	c := credentials(s)
	cfg, err := json.Marshal(map[string]any{
		"nks_url": s.URL("nks"), "identity_url": s.URL("identity"), "token": nksService(s).Token(),
		"username": c.Username, "password": c.Password, "tenant_id": c.TenantID, "region": identity.Region,
		"cluster": cluster, "flavor_id": flavorID, "image_id": imageID,
		"fixed_network": fixedNetwork, "fixed_subnet": fixedSubnet, "labels": clusterLabels(),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "magnum.py"), mode, string(cfg))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "magnum.py %s:\n%s%s", mode, stdout.String(), stderr.String())
	var out map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String()+stderr.String())
	return out
}

// python-magnumclient, unchanged, creates, lists, reads and deletes
// clusters and node groups through each way it can reach the API.
func TestPythonMagnumclientManagesClustersAndNodeGroups(t *testing.T) {
	py := python(t)
	for _, mode := range []string{"token", "session", "catalog"} {
		t.Run("with "+mode, func(t *testing.T) {
			s := start(t)
			// Every task completes at the next call: the script does not
			// wait, and never deletes a cluster while a group is going.
			for typ := range nks.DefaultDurations {
				nksService(s).SetDuration(typ, 0)
			}
			out := runMagnum(t, py, s, mode, "py-"+mode)
			assert.Equal(t, []any{"py-" + mode}, out["clusters"])
			assert.Equal(t, "CREATE_COMPLETE", out["cluster_status"])
			assert.Equal(t, "batch", out["nodegroup_created"])
			assert.Equal(t, []any{"batch", "default-worker"}, out["nodegroups"])
			assert.Equal(t, "CREATE_COMPLETE", out["nodegroup_status"])
			assert.Equal(t, []any{"default-worker"}, out["nodegroups_after_delete"])
			assert.Empty(t, out["clusters_after_delete"])

			// The client sent the node-group collection with a trailing
			// slash, and the journal kept it so.
			uuid := out["cluster_uuid"].(string)
			var paths []string
			for _, c := range s.Journal.Calls("nks", "", "") {
				assert.Less(t, c.Status, 400, "%s %s answered %d", c.Method, c.Path, c.Status)
				paths = append(paths, c.Method+" "+c.Path)
			}
			assert.Contains(t, paths, "POST /v1/clusters/"+uuid+"/nodegroups/")
			assert.Contains(t, paths, "GET /v1/clusters/"+uuid+"/nodegroups/")
			if mode == "catalog" {
				assert.NotEmpty(t, s.Journal.Calls("identity", "POST", "/v2.0/tokens"), "the client logged in")
			}
		})
	}
}
