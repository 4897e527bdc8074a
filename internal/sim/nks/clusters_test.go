package nks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestACreatedClusterMovesFromInProgressToCompleteWithItsTaskHistory(t *testing.T) {
	e := start(t)
	out := e.mustDo(202, "POST", "/v1/clusters", createBody("prod", nil))
	id := out["uuid"].(string)
	require.Len(t, id, 36)

	c := e.mustDo(200, "GET", "/v1/clusters/"+id, nil)
	assert.Equal(t, "CREATE_IN_PROGRESS", c["status"])
	assert.Nil(t, c["api_address"], "no endpoint until the create completes")
	ev := e.lastEvent(id, "CLUSTER_CREATE")
	assert.Equal(t, "IN_PROGRESS", ev["state"])
	assert.Equal(t, "cluster", ev["resource_type"])
	assert.Equal(t, id, ev["resource_uuid"])
	assert.Equal(t, "prod", ev["cluster_name"])
	assert.Nil(t, ev["updated_at"])
	r := e.do("GET", "/v1/clusters/"+id+"/config", nil)
	assert.Equal(t, 400, r.status, "no kubeconfig while creating")

	e.srv.Clock.Advance(9 * time.Minute)
	assert.Equal(t, "CREATE_IN_PROGRESS", e.mustDo(200, "GET", "/v1/clusters/prod", nil)["status"])
	e.srv.Clock.Advance(time.Minute)
	c = e.mustDo(200, "GET", "/v1/clusters/prod", nil)
	assert.Equal(t, "CREATE_COMPLETE", c["status"])
	assert.Equal(t, float64(2), c["node_count"])
	assert.Len(t, strs(c["node_addresses"]), 2)
	assert.Regexp(t, `^https://[0-9.]+:6443$`, c["api_address"])
	assert.Equal(t, "v1.29.3", c["labels"].(map[string]any)["kube_tag"])
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$`, c["created_at"])

	ev = e.lastEvent(id, "CLUSTER_CREATE")
	assert.Equal(t, "SUCCESS", ev["state"])
	assert.Nil(t, ev["contents"], "contents is null when successful")
	assert.Equal(t, "2026-03-01T09:10:00+00:00", ev["updated_at"])
	one := e.mustDo(200, "GET", "/v1/clusters/"+id+"/events/"+ev["uuid"].(string), nil)
	assert.Equal(t, ev, one)

	groups := e.mustDo(200, "GET", "/v1/clusters/prod/nodegroups", nil)["nodegroups"].([]any)
	require.Len(t, groups, 1, "default-master stays out of the list")
	assert.Equal(t, "default-worker", groups[0].(map[string]any)["name"])
	assert.Equal(t, "CREATE_COMPLETE", groups[0].(map[string]any)["status"])

	cfg := e.mustDo(200, "GET", "/v1/clusters/prod/config", nil)["config"].(string)
	assert.Contains(t, cfg, "server: "+c["api_address"].(string))
	assert.Contains(t, cfg, "kind: Config")
	assert.Contains(t, cfg, "current-context: default")

	list := e.mustDo(200, "GET", "/v1/clusters", nil)["clusters"].([]any)
	require.Len(t, list, 1)
	item := list[0].(map[string]any)
	for _, k := range []string{"uuid", "name", "flavor_id", "keypair", "node_count", "stack_id", "status", "labels"} {
		assert.Contains(t, item, k)
	}
	assert.NotContains(t, item, "api_address", "single read only")
}

func TestNamesAndUUIDsBothWorkInPathsButEventsTakeTheUUID(t *testing.T) {
	e := start(t)
	id := e.createCluster("alpha", nil)
	byName := e.mustDo(200, "GET", "/v1/clusters/alpha", nil)
	byID := e.mustDo(200, "GET", "/v1/clusters/"+id, nil)
	assert.Equal(t, byName, byID)

	g := e.mustDo(200, "GET", "/v1/clusters/alpha/nodegroups/default-worker", nil)
	g2 := e.mustDo(200, "GET", "/v1/clusters/"+id+"/nodegroups/"+g["uuid"].(string), nil)
	assert.Equal(t, g, g2)
	assert.Equal(t, id, g["cluster_id"])

	r := e.do("GET", "/v1/clusters/alpha/events", nil)
	code, detail := apiError(t, r)
	assert.Equal(t, 404, code, "the task history path takes {CLUSTER_UUID}")
	assert.Contains(t, detail, "alpha")
}

func TestDeletingAClusterEndsIn404(t *testing.T) {
	e := start(t)
	id := e.createCluster("gone", nil)
	r := e.do("DELETE", "/v1/clusters/gone", nil)
	require.Equal(t, 204, r.status)
	assert.Empty(t, r.raw, "deletion returns no body")
	assert.Equal(t, "DELETE_IN_PROGRESS", e.mustDo(200, "GET", "/v1/clusters/"+id, nil)["status"])
	assert.Equal(t, "IN_PROGRESS", e.lastEvent(id, "CLUSTER_DELETE")["state"])
	e.srv.Clock.Advance(5 * time.Minute)
	code, _ := apiError(t, e.do("GET", "/v1/clusters/"+id, nil))
	assert.Equal(t, 404, code)
	assert.Empty(t, e.mustDo(200, "GET", "/v1/clusters", nil)["clusters"])
}

func TestResizeFollowsNodeCountAndRemovesTheNodesNamed(t *testing.T) {
	e := start(t)
	e.createCluster("rs", func(body, _ map[string]any) { body["node_count"] = "3" })
	g := e.mustDo(200, "GET", "/v1/clusters/rs/nodegroups/default-worker", nil)
	nodes := g["nodes"].([]any)
	require.Len(t, nodes, 3)
	victim := nodes[1].(map[string]any)

	out := e.mustDo(202, "POST", "/v1/clusters/rs/actions/resize", map[string]any{
		"nodegroup": g["uuid"], "node_count": 2, "nodes_to_remove": []string{victim["uuid"].(string)},
	})
	c := e.mustDo(200, "GET", "/v1/clusters/rs", nil)
	assert.Equal(t, c["uuid"], out["uuid"], "resize answers the cluster UUID")
	assert.Equal(t, "UPDATE_IN_PROGRESS", c["status"])
	ev := e.lastEvent(c["uuid"].(string), "CLUSTER_RESIZE")
	assert.Equal(t, "nodegroup", ev["resource_type"])
	assert.Equal(t, "default-worker", ev["resource_name"])
	assert.Equal(t, float64(3), c["node_count"], "the count changes when the task ends")

	e.srv.Clock.Advance(2 * time.Minute)
	c = e.mustDo(200, "GET", "/v1/clusters/rs", nil)
	assert.Equal(t, "UPDATE_COMPLETE", c["status"])
	assert.Equal(t, float64(2), c["node_count"])
	assert.NotContains(t, strs(c["node_addresses"]), victim["address"])

	e.mustDo(202, "POST", "/v1/clusters/rs/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 5})
	e.srv.Clock.Advance(2 * time.Minute)
	c = e.mustDo(200, "GET", "/v1/clusters/rs", nil)
	assert.Equal(t, float64(5), c["node_count"])
	assert.Len(t, strs(c["node_addresses"]), 5)
	assert.Equal(t, "SUCCESS", e.lastEvent(c["uuid"].(string), "CLUSTER_RESIZE")["state"])
}

func TestCNIChangeFromFlannelToCalicoUpdatesTheNetworkLabels(t *testing.T) {
	e := start(t)
	id := e.createCluster("cni", func(_, l map[string]any) { l["cni_driver"] = "flannel" })
	out := e.mustDo(202, "POST", "/v1/clusters/cni/actions/cni_update", map[string]any{
		"cni": "calico", "num_buffer_nodes": 1, "num_max_unavailable_nodes": 1, "pod_cidr": "10.200.0.0/22", "pod_subnet": "24",
	})
	assert.Equal(t, id, out["uuid"])
	assert.Equal(t, "IN_PROGRESS", e.lastEvent(id, "CLUSTER_CNI_UPDATE")["state"])
	e.srv.Clock.Advance(10 * time.Minute)
	l := e.mustDo(200, "GET", "/v1/clusters/cni", nil)["labels"].(map[string]any)
	assert.Equal(t, "calico", l["cni_driver"])
	assert.Equal(t, "10.200.0.0/22", l["pods_network_cidr"])
	assert.Equal(t, "24", l["pods_network_subnet"])
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "CLUSTER_CNI_UPDATE")["state"])

	code, detail := apiError(t, e.do("POST", "/v1/clusters/cni/actions/cni_update", map[string]any{
		"cni": "calico", "pod_cidr": "10.210.0.0/22", "pod_subnet": "24",
	}))
	assert.Equal(t, 400, code)
	assert.Contains(t, detail, "only a change from flannel")
}

func TestIPAccessControlIsSetAsynchronouslyAndReadBack(t *testing.T) {
	e := start(t)
	id := e.createCluster("acl", nil)
	assert.Equal(t, map[string]any{"cluster_uuid": id, "enable": "false"}, e.mustDo(200, "GET", "/v1/clusters/acl/api_ep_ipacl", nil))

	targets := []map[string]any{{"cidr_address": "10.0.0.0/8", "description": "office"}, {"cidr_address": "203.0.113.7"}}
	out := e.mustDo(202, "POST", "/v1/clusters/acl/api_ep_ipacl", map[string]any{"enable": "true", "action": "ALLOW", "ipacl_targets": targets})
	assert.Equal(t, id, out["uuid"])
	e.srv.Clock.Advance(time.Minute)
	got := e.mustDo(200, "GET", "/v1/clusters/"+id+"/api_ep_ipacl", nil)
	assert.Equal(t, "true", got["enable"])
	assert.Equal(t, "ALLOW", got["action"])
	assert.Len(t, got["ipacl_targets"], 2)
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "CLUSTER_API_EP_IPACL_UPDATE")["state"])

	e.mustDo(202, "POST", "/v1/clusters/acl/api_ep_ipacl", map[string]any{"enable": "false"})
	e.srv.Clock.Advance(time.Minute)
	assert.Equal(t, map[string]any{"cluster_uuid": id, "enable": "false"}, e.mustDo(200, "GET", "/v1/clusters/acl/api_ep_ipacl", nil),
		"when disabled only cluster_uuid and enable are returned")
}

func TestSupportsListsVersionsAndEventTypes(t *testing.T) {
	e := start(t)
	out := e.mustDo(200, "GET", "/v1/supports", nil)
	k8s := out["supported_k8s"].(map[string]any)
	assert.Equal(t, true, k8s["v1.29.3"])
	assert.Equal(t, false, k8s["v1.23.3"])
	assert.GreaterOrEqual(t, len(k8s), 5)
	types := out["supported_event_type"].(map[string]any)
	assert.Contains(t, types["cluster_events"], "CLUSTER_CREATE")
	assert.Contains(t, types["nodegroup_events"], "NODEGROUP_UPGRADE")
	assert.Contains(t, types["nodegroup_events"], "CLUSTER_RESIZE")

	require.Equal(t, 204, e.do("POST", "/_admin/versions", map[string]any{"v1.32.1": true, "v1.29.3": false}).status)
	k8s = e.mustDo(200, "GET", "/v1/supports", nil)["supported_k8s"].(map[string]any)
	assert.Equal(t, true, k8s["v1.32.1"])
	assert.Equal(t, false, k8s["v1.29.3"])
}
