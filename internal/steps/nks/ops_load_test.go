package nks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/playbook"
	"github.com/runbook/runbook/internal/secrets"
	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/internal/steps"
)

// badBook has the spec's limits broken by literal values.
const badBook = `version: 1
name: bad-values
steps:
  - id: resize
    uses: nks.cluster.resize
    with:
      cluster: prod
      nodegroup: default-worker
      node_count: 11
  - id: cni
    uses: nks.cluster.cni_update
    with:
      cluster: prod
      pod_cidr: 10.200.0.0/16
      pod_subnet: 29
  - id: create
    uses: nks.cluster.create
    with:
      name: prod
      keypair: k
      node_count: 2
      flavor_id: f
      fixed_network: n
      fixed_subnet: s
      labels:
        availability_zone: kr-pub-a
        node_image: img
        boot_volume_type: General HDD
        boot_volume_size: 50
        kube_tag: "1.29"
        pods_network_cidr: 198.18.0.0/16
        pods_network_subnet: 24
`

func TestLiteralValuesBreakingTheSpecAreLoadErrorsWithPositions(t *testing.T) {
	_, err := playbook.Parse("bad.yaml", []byte(badBook), playbook.LoadOptions{})
	require.Error(t, err)
	var ds playbook.Diagnostics
	require.ErrorAs(t, err, &ds)
	got := strings.Split(ds.Error(), "\n")
	assert.Equal(t, []string{
		"bad.yaml:9:7: steps[0].with.node_count: must be between 1 and 10 (got 11)",
		"bad.yaml:15:7: steps[1].with.pod_subnet: must be between 20 and 28 (got 29)",
		`bad.yaml:30:9: steps[2].with.labels.kube_tag: must be of the form v1.28.3 (got "1.29")`,
		"bad.yaml:31:9: steps[2].with.labels.pods_network_cidr: pod network 198.18.0.0/16 overlaps the internal band 198.18.0.0/19",
	}, got)
}

func TestLoadTimeChecksOfEachType(t *testing.T) {
	cases := []struct {
		name, step string
		with       map[string]any
		want       string
	}{
		{"a pod subnet must leave room in the pod network", "nks.cluster.cni_update",
			map[string]any{"cluster": "c", "pod_cidr": "10.0.0.0/23", "pod_subnet": 24}, "pod_subnet: pod subnet /24 does not fit the pod network 10.0.0.0/23"},
		{"a pod network smaller than /24 is refused", "nks.cluster.cni_update",
			map[string]any{"cluster": "c", "pod_cidr": "10.0.0.0/26", "pod_subnet": 28}, "pod_cidr: pod network 10.0.0.0/26 is too small"},
		{"only calico is a CNI target", "nks.cluster.cni_update",
			map[string]any{"cluster": "c", "pod_cidr": "10.0.0.0/16", "cni": "cilium"}, `cni: must be one of calico (got "cilium")`},
		{"the pod network avoids the link-local band at create", "nks.cluster.create",
			withLabel("pods_network_cidr", "169.254.0.0/16"), "labels.pods_network_cidr: pod network 169.254.0.0/16 overlaps the link-local band"},
		{"pod and service networks must not overlap", "nks.cluster.create",
			withLabel("service_cluster_ip_range", "10.100.0.0/20"), "overlaps the service network 10.100.0.0/20"},
		{"old versions avoid the bridge range", "nks.cluster.create",
			withLabels(map[string]any{"kube_tag": "v1.23.3", "pods_network_cidr": "172.17.0.0/16"}), "bridge range"},
		{"max unavailable nodes is at least 1", "nks.nodegroup.upgrade",
			map[string]any{"cluster": "c", "nodegroup": "g", "version": "v1.31.4", "num_max_unavailable_nodes": 0}, "num_max_unavailable_nodes: must be at least 1 (got 0)"},
		{"buffer nodes is not negative", "nks.nodegroup.flavor",
			map[string]any{"cluster": "c", "nodegroup": "g", "flavor_id": "f", "num_buffer_nodes": -1}, "num_buffer_nodes: must be at least 0 (got -1)"},
		{"the flavor change type is flavor_id", "nks.nodegroup.flavor",
			map[string]any{"cluster": "c", "nodegroup": "g", "flavor_id": "f", "type": "image"}, `type: must be one of flavor_id (got "image")`},
		{"an empty node in the list is refused", "nks.nodegroup.stop_nodes",
			map[string]any{"cluster": "c", "nodegroup": "g", "node_list": []any{"a", ""}}, "node_list: node list"},
		{"enabled IP access control needs an action and targets", "nks.cluster.ipacl.set",
			map[string]any{"cluster": "c", "enable": true}, "action: is required when enable is true"},
		{"an IP access control target is an address or range", "nks.cluster.ipacl.set",
			map[string]any{"cluster": "c", "enable": true, "action": "ALLOW", "ipacl_targets": []any{map[string]any{"cidr_address": "office"}}}, "ipacl_targets[0]"},
		{"the autoscaler minimum is not above its maximum", "nks.nodegroup.autoscaler.set",
			map[string]any{"cluster": "c", "nodegroup": "g", "ca_enable": true, "ca_min_node_count": 5, "ca_max_node_count": 2}, "ca_min_node_count: autoscaler minimum 5 is above the maximum 2"},
		{"a name used in paths has no slash", "nks.nodegroup.create",
			func() map[string]any { w := groupWith("c", "a/b"); return w }(), `name: node group name "a/b" must not contain`},
		{"wait_timeout is at most 72h", "nks.cluster.delete",
			map[string]any{"cluster": "c", "wait": true, "wait_timeout": "100h"}, "wait_timeout: must be between 1s and 72h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var all []string
			for _, p := range desc(t, tc.step).CheckLiteral(tc.with) {
				all = append(all, p.Error())
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.want)
		})
	}
	t.Run("values from expressions are not judged at load time", func(t *testing.T) {
		assert.Empty(t, desc(t, "nks.cluster.resize").CheckLiteral(map[string]any{"cluster": "c", "nodegroup": "g", "node_count": steps.Dynamic{}}))
		assert.Empty(t, desc(t, "nks.cluster.cni_update").CheckLiteral(map[string]any{"cluster": "c", "pod_cidr": steps.Dynamic{}, "pod_subnet": 24}))
		w := withLabel("pods_network_cidr", steps.Dynamic{})
		assert.Empty(t, desc(t, "nks.cluster.create").CheckLiteral(w))
	})
}

func withLabel(k string, v any) map[string]any { return withLabels(map[string]any{k: v}) }

func withLabels(kv map[string]any) map[string]any {
	w := createWith("prod", "v1.31.4")
	labels := map[string]any{}
	for k, v := range w["labels"].(map[string]any) {
		labels[k] = v
	}
	for k, v := range kv {
		labels[k] = v
	}
	w["labels"] = labels
	return w
}

// exprBook feeds the same bad values through expressions (inputs).
const exprBook = `version: 1
name: expr-values
inputs:
  count: {type: integer, default: 3}
  subnet: {type: integer, default: 24}
  pods: {type: string, default: 10.100.0.0/16}
steps:
  - id: resize
    uses: nks.cluster.resize
    if: "inputs.count != 3"
    with:
      cluster: prod
      nodegroup: default-worker
      node_count: ${{ inputs.count }}
  - id: cni
    uses: nks.cluster.cni_update
    if: "inputs.subnet != 24"
    with:
      cluster: prod
      pod_cidr: 10.200.0.0/16
      pod_subnet: ${{ inputs.subnet }}
  - id: create
    uses: nks.cluster.create
    if: "inputs.pods != '10.100.0.0/16'"
    with:
      name: other
      keypair: k
      node_count: 2
      flavor_id: f
      fixed_network: n
      fixed_subnet: s
      labels:
        availability_zone: kr-pub-a
        node_image: img
        boot_volume_type: General HDD
        boot_volume_size: 50
        kube_tag: v1.31.4
        pods_network_cidr: ${{ inputs.pods }}
`

func TestTheSameValuesThroughExpressionsFailBeforeAnyCall(t *testing.T) {
	s := startOpsSim(t)
	s.run("nks.cluster.create", createWith("prod", "v1.30.3"))
	s.settle(cloud.EventClusterCreate)
	s.srv.Journal.Reset()

	pb, err := playbook.Parse(filepath.Join(t.TempDir(), "expr.yaml"), []byte(exprBook), playbook.LoadOptions{})
	require.NoError(t, err, "expressions are not judged at load time")
	e := newOpsEngine(t, s.conn)
	cases := []struct {
		name   string
		inputs map[string]any
		step   string
		want   string
	}{
		{"node_count 11", map[string]any{"count": 11}, "resize", "node_count: must be between 1 and 10 (got 11)"},
		{"pod subnet 29", map[string]any{"subnet": 29}, "cni", "pod_subnet: must be between 20 and 28 (got 29)"},
		{"a pod network in 198.18.0.0/19", map[string]any{"pods": "198.18.0.0/16"}, "create", "labels.pods_network_cidr: pod network 198.18.0.0/16 overlaps the internal band 198.18.0.0/19"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, err := e.Run(context.Background(), pb, engine.StartRequest{Inputs: tc.inputs})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			require.NotNil(t, run)
			assert.Equal(t, state.RunFailed, run.Status)
			rec := stepRecord(t, e, run.ID, tc.step)
			require.NotNil(t, rec.Error, "step %s failed", tc.step)
			assert.Contains(t, rec.Error.Message, tc.want)
			assert.Equal(t, string(fault.Invalid), rec.Error.Code)
			for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodDelete} {
				assert.Empty(t, s.srv.Journal.Calls("nks", m, "/v1"), "no mutating call was sent")
			}
		})
	}
}

type opsEngine struct {
	*engine.Engine
	store *bolt.Store
}

func newOpsEngine(t *testing.T, conn map[string]any) *opsEngine {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	src, err := secrets.NewSource(nil, "")
	require.NoError(t, err)
	e := engine.New(engine.Options{
		Store: st, Secrets: src, Redactor: secrets.NewRedactor(), Environ: []string{},
		Connection: func(name string, _ map[string]any) (map[string]any, error) {
			if name != "nks" {
				return nil, &fault.Error{Code: fault.Invalid, Message: "no connection " + name}
			}
			return conn, nil
		},
		Playbooks: engine.Playbooks{Parse: func(file string, src []byte) (*playbook.Playbook, error) {
			return playbook.Parse(file, src, playbook.LoadOptions{})
		}},
	})
	return &opsEngine{Engine: e, store: st}
}

func stepRecord(t *testing.T, e *opsEngine, runID, id string) *state.StepRecord {
	t.Helper()
	recs, err := e.store.Steps(context.Background(), runID)
	require.NoError(t, err)
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no step %s in run %s", id, runID)
	return nil
}

func TestPlanShowsTheExactCalls(t *testing.T) {
	plan := func(typ string, with map[string]any) string {
		t.Helper()
		d := desc(t, typ)
		p, _, problems := d.Decode(with)
		require.Empty(t, problems)
		b, err := json.MarshalIndent(d.Plan(p), "", "  ")
		require.NoError(t, err)
		return string(b)
	}
	assert.JSONEq(t, `[
	  {"method":"GET","path":"/v1/clusters/prod/nodegroups/default-worker","note":"reads the node group's UUID"},
	  {"method":"POST","path":"/v1/clusters/prod/actions/resize","body":{"nodegroup":"default-worker","node_count":4}}
	]`, plan("nks.cluster.resize", map[string]any{"cluster": "prod", "nodegroup": "default-worker", "node_count": 4}))
	assert.JSONEq(t, `[
	  {"method":"GET","path":"/v1/clusters/my%20cluster","note":"reads the service network and node count"},
	  {"method":"POST","path":"/v1/clusters/my%20cluster/actions/cni_update","body":{"cni":"calico","pod_cidr":"10.200.0.0/16","pod_subnet":"24"}}
	]`, plan("nks.cluster.cni_update", map[string]any{"cluster": "my cluster", "pod_cidr": "10.200.0.0/16"}))
	assert.JSONEq(t, `[{"method":"PATCH","path":"/v1/clusters/prod/nodegroups/pool-b","body":{"type":"flavor_id","flavor_id":"f-2","num_buffer_nodes":0}}]`,
		plan("nks.nodegroup.flavor", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "flavor_id": "f-2", "num_buffer_nodes": 0}))
	assert.JSONEq(t, `[{"method":"POST","path":"/v1/clusters/prod/nodegroups/pool-b/stop_node","body":{"node_list":"a:b"}}]`,
		plan("nks.nodegroup.stop_nodes", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "node_list": []any{"a", "b"}}))
	assert.JSONEq(t, `[{"method":"POST","path":"/v1/clusters/prod/nodegroups/pool-b/autoscale","body":{"ca_enable":"True","ca_max_node_count":"5","ca_scale_down_util_thresh":"50"}}]`,
		plan("nks.nodegroup.autoscaler.set", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "ca_enable": true, "ca_max_node_count": 5, "ca_scale_down_util_thresh": 50}))

	create := plan("nks.cluster.create", createWith("prod", "v1.31.4"))
	var calls []struct {
		Method, Path string
		Body         map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(create), &calls))
	require.Len(t, calls, 2)
	assert.Equal(t, "/v1/supports", calls[0].Path)
	assert.Equal(t, "POST /v1/clusters", calls[1].Method+" "+calls[1].Path)
	assert.Equal(t, "iaas_console", calls[1].Body["cluster_template_id"])
	labels := calls[1].Body["labels"].(map[string]any)
	assert.Equal(t, map[string]any{
		"availability_zone": "kr-pub-a", "node_image": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11", "boot_volume_type": "General HDD",
		"boot_volume_size": "50", "cert_manager_api": "True", "ca_enable": "False", "kube_tag": "v1.31.4",
		"master_lb_floating_ip_enabled": "True", "pods_network_cidr": "10.100.0.0/16", "pods_network_subnet": float64(24),
		"cni_driver": "flannel", "clusterautoscale": "nodegroupfeature",
	}, labels)
}

func TestPlanMatchesWhatIsSent(t *testing.T) {
	s := startOpsSim(t)
	with := createWith("prod", "v1.31.4")
	d := desc(t, "nks.cluster.create")
	p, _, problems := d.Decode(with)
	require.Empty(t, problems)
	planned, err := json.Marshal(d.Plan(p)[1].Body)
	require.NoError(t, err)
	s.run("nks.cluster.create", with)
	sent := s.srv.Journal.Calls("nks", http.MethodPost, "/v1/clusters")
	require.Len(t, sent, 1)
	assert.JSONEq(t, string(planned), sent[0].Body)
}
