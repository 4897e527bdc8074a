package nks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim/nks"
)

func ngBody(name string) map[string]any {
	return map[string]any{
		"name": name, "flavor_id": "2d6c9f5c-5b68-4e62-8d7a-3cac4f7b8b02", "image_id": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
		"node_count": 2,
		"labels": map[string]any{
			"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD", "boot_volume_size": "50", "ca_enable": "False",
		},
	}
}

func TestNodeGroupsAreCreatedAndDeletedAsynchronously(t *testing.T) {
	e := start(t)
	id := e.createCluster("ng", nil)
	g := e.mustDo(202, "POST", "/v1/clusters/ng/nodegroups", ngBody("batch"))
	for _, k := range []string{"uuid", "cluster_id", "flavor_id", "image_id", "labels", "max_node_count", "min_node_count", "name", "node_count", "project_id", "role", "links"} {
		assert.Contains(t, g, k)
	}
	assert.Equal(t, id, g["cluster_id"])
	assert.Equal(t, "worker", g["role"])
	assert.Equal(t, "v1.29.3", g["labels"].(map[string]any)["kube_tag"], "a new group runs the master's version")
	got := e.mustDo(200, "GET", "/v1/clusters/ng/nodegroups/batch", nil)
	assert.Equal(t, "CREATE_IN_PROGRESS", got["status"])
	ev := e.lastEvent(id, "NODEGROUP_CREATE")
	assert.Equal(t, g["uuid"], ev["resource_uuid"])
	e.srv.Clock.Advance(5 * time.Minute)
	assert.Equal(t, "CREATE_COMPLETE", e.mustDo(200, "GET", "/v1/clusters/ng/nodegroups/"+g["uuid"].(string), nil)["status"])
	assert.Len(t, e.mustDo(200, "GET", "/v1/clusters/ng/nodegroups", nil)["nodegroups"], 2)
	assert.Equal(t, float64(4), e.mustDo(200, "GET", "/v1/clusters/ng", nil)["node_count"], "the cluster counts every worker")

	r := e.do("DELETE", "/v1/clusters/ng/nodegroups/batch", nil)
	require.Equal(t, 204, r.status)
	assert.Empty(t, r.raw)
	assert.Equal(t, "DELETE_IN_PROGRESS", e.mustDo(200, "GET", "/v1/clusters/ng/nodegroups/batch", nil)["status"])
	e.srv.Clock.Advance(3 * time.Minute)
	code, _ := apiError(t, e.do("GET", "/v1/clusters/ng/nodegroups/batch", nil))
	assert.Equal(t, 404, code)
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_DELETE")["state"])

	code, detail := apiError(t, e.do("DELETE", "/v1/clusters/ng/nodegroups/default-worker", nil))
	assert.Equal(t, 400, code)
	assert.Equal(t, "Deleting the last nodegroup is not supported.", detail)
	code, _ = apiError(t, e.do("GET", "/v1/clusters/ng/nodegroups/default-master", nil))
	assert.Equal(t, 403, code, "the real service refuses to show default-master")
}

func TestUpgradeGoesMasterFirstAndWorkersNeverAboveTheMaster(t *testing.T) {
	e := start(t)
	id := e.createCluster("up", nil)
	e.mustDo(202, "POST", "/v1/clusters/up/nodegroups", ngBody("extra"))
	e.srv.Clock.Advance(5 * time.Minute)

	t.Run("a worker above the master is refused", func(t *testing.T) {
		code, detail := apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-worker/upgrade", map[string]any{"version": "v1.30.3"}))
		assert.Equal(t, 400, code)
		assert.Contains(t, detail, "above the master version v1.29.3")
	})
	t.Run("an unsupported version is refused", func(t *testing.T) {
		code, detail := apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-master/upgrade", map[string]any{"version": "v1.26.3"}))
		assert.Equal(t, 400, code)
		assert.Contains(t, detail, "no longer supported")
		code, _ = apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-master/upgrade", map[string]any{"version": "v9.9.9"}))
		assert.Equal(t, 400, code)
	})
	t.Run("the version already running is refused", func(t *testing.T) {
		code, detail := apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-master/upgrade", map[string]any{"version": "v1.29.3"}))
		assert.Equal(t, 400, code)
		assert.Contains(t, detail, "already at")
	})

	master := e.mustDo(202, "POST", "/v1/clusters/up/nodegroups/default-master/upgrade", map[string]any{"version": "v1.30.3"})
	ev := e.lastEvent(id, "NODEGROUP_UPGRADE")
	assert.Equal(t, master["uuid"], ev["resource_uuid"])
	assert.Equal(t, "default-master", ev["resource_name"])
	assert.Equal(t, "IN_PROGRESS", ev["state"])
	assert.Equal(t, "UPDATE_IN_PROGRESS", e.mustDo(200, "GET", "/v1/clusters/up", nil)["status"])
	code, detail := apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-worker/upgrade", map[string]any{"version": "v1.30.3"}))
	assert.Equal(t, 400, code, "the master runs v1.29.3 until its upgrade ends")
	assert.Contains(t, detail, "above the master version")
	code, detail = apiError(t, e.do("POST", "/v1/clusters/up/nodegroups/default-worker/userscript", map[string]any{"contents": "x"}))
	assert.Equal(t, 400, code, "nothing else runs during the master's upgrade")
	assert.Contains(t, detail, "in progress")

	e.srv.Clock.Advance(5 * time.Minute)
	c := e.mustDo(200, "GET", "/v1/clusters/up", nil)
	assert.Equal(t, "UPDATE_COMPLETE", c["status"])
	assert.Equal(t, "v1.30.3", c["labels"].(map[string]any)["kube_tag"])
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_UPGRADE")["state"])

	w := e.mustDo(202, "POST", "/v1/clusters/up/nodegroups/default-worker/upgrade",
		map[string]any{"version": "v1.30.3", "num_buffer_nodes": 1, "num_max_unavailable_nodes": 2})
	g := e.mustDo(200, "GET", "/v1/clusters/up/nodegroups/default-worker", nil)
	assert.Equal(t, w["uuid"], g["uuid"], "upgrade answers the node group UUID")
	assert.Equal(t, "UPDATE_IN_PROGRESS", g["status"])
	assert.Equal(t, "v1.29.3", g["labels"].(map[string]any)["kube_tag"])
	e.mustDo(202, "POST", "/v1/clusters/up/nodegroups/extra/upgrade", map[string]any{"version": "v1.30.3"})
	e.srv.Clock.Advance(5 * time.Minute)
	for _, name := range []string{"default-worker", "extra"} {
		g := e.mustDo(200, "GET", "/v1/clusters/up/nodegroups/"+name, nil)
		assert.Equal(t, "UPDATE_COMPLETE", g["status"])
		assert.Equal(t, "v1.30.3", g["labels"].(map[string]any)["kube_tag"], name)
	}
}

func TestFailNextEndsTheMatchingTaskInFailWithItsContents(t *testing.T) {
	e := start(t)
	id := e.createCluster("ff", nil)
	r := e.do("POST", "/_admin/fail-next", map[string]any{
		"operation": "NODEGROUP_UPGRADE", "cluster": "ff", "nodegroup": "default-master", "contents": "etcd backup failed",
	})
	require.Equal(t, 204, r.status, r.raw)
	e.mustDo(202, "POST", "/v1/clusters/ff/nodegroups/default-master/upgrade", map[string]any{"version": "v1.30.3"})
	assert.Equal(t, "IN_PROGRESS", e.lastEvent(id, "NODEGROUP_UPGRADE")["state"], "the failure shows when the task ends")
	e.srv.Clock.Advance(5 * time.Minute)
	ev := e.lastEvent(id, "NODEGROUP_UPGRADE")
	assert.Equal(t, "FAIL", ev["state"])
	assert.Equal(t, "etcd backup failed", ev["contents"])
	c := e.mustDo(200, "GET", "/v1/clusters/ff", nil)
	assert.Equal(t, "UPDATE_FAILED", c["status"])
	assert.Equal(t, "etcd backup failed", c["status_reason"])
	assert.Equal(t, "v1.29.3", c["labels"].(map[string]any)["kube_tag"], "a failed upgrade changes nothing")

	e.mustDo(202, "POST", "/v1/clusters/ff/nodegroups/default-master/upgrade", map[string]any{"version": "v1.30.3"})
	e.srv.Clock.Advance(5 * time.Minute)
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_UPGRADE")["state"], "the rule applied to one task only")

	e.svc().FailNext(nks.Failure{Operation: "cluster_create", Contents: "quota exceeded"})
	out := e.mustDo(202, "POST", "/v1/clusters", createBody("doomed", nil))
	e.srv.Clock.Advance(10 * time.Minute)
	c = e.mustDo(200, "GET", "/v1/clusters/doomed", nil)
	assert.Equal(t, "CREATE_FAILED", c["status"])
	ev = e.lastEvent(out["uuid"].(string), "CLUSTER_CREATE")
	assert.Equal(t, "FAIL", ev["state"])
	assert.Equal(t, "quota exceeded", ev["contents"])

	r = e.do("POST", "/_admin/fail-next", map[string]any{"operation": "NOPE"})
	assert.Equal(t, 400, r.status)
}

func TestAFailureRuleCanLetTasksSucceedFirst(t *testing.T) {
	e := start(t)
	id := e.createCluster("nth", nil)
	r := e.do("POST", "/_admin/fail-next", map[string]any{
		"operation": "NODEGROUP_USERSCRIPT_UPDATE", "nodegroup": "default-worker", "contents": "third time", "after": 2,
	})
	require.Equal(t, 204, r.status, r.raw)
	var states []string
	for range 4 {
		e.mustDo(202, "POST", "/v1/clusters/nth/nodegroups/default-worker/userscript", map[string]any{"contents": "#!/bin/sh\n"})
		e.srv.Clock.Advance(time.Hour)
		states = append(states, e.lastEvent(id, "NODEGROUP_USERSCRIPT_UPDATE")["state"].(string))
	}
	assert.Equal(t, []string{"SUCCESS", "SUCCESS", "FAIL", "SUCCESS"}, states, "after: 2 fails the third task only")
}

func TestDurationsAreConfigurable(t *testing.T) {
	e := start(t)
	require.Equal(t, 204, e.do("POST", "/_admin/durations", map[string]any{"CLUSTER_CREATE": "30s"}).status)
	out := e.mustDo(202, "POST", "/v1/clusters", createBody("quick", nil))
	e.srv.Clock.Advance(30 * time.Second)
	assert.Equal(t, "CREATE_COMPLETE", e.mustDo(200, "GET", "/v1/clusters/"+out["uuid"].(string), nil)["status"])
	e.svc().SetDuration("NODEGROUP_USERSCRIPT_UPDATE", time.Hour)
	e.mustDo(202, "POST", "/v1/clusters/quick/nodegroups/default-worker/userscript", map[string]any{"contents": "#!/bin/sh\n"})
	e.srv.Clock.Advance(59 * time.Minute)
	assert.Equal(t, "IN_PROGRESS", e.lastEvent(out["uuid"].(string), "NODEGROUP_USERSCRIPT_UPDATE")["state"])
	assert.Equal(t, 400, e.do("POST", "/_admin/durations", map[string]any{"CLUSTER_CREATE": "soon"}).status)
}

func TestStopAndStartMoveNodesOutOfAndBackIntoTheAddresses(t *testing.T) {
	e := start(t)
	id := e.createCluster("ss", nil)
	g := e.mustDo(200, "GET", "/v1/clusters/ss/nodegroups/default-worker", nil)
	n := g["nodes"].([]any)[0].(map[string]any)
	out := e.mustDo(202, "POST", "/v1/clusters/ss/nodegroups/default-worker/stop_node", map[string]any{"node_list": n["uuid"]})
	assert.Equal(t, g["uuid"], out["uuid"])
	e.srv.Clock.Advance(time.Minute)
	g = e.mustDo(200, "GET", "/v1/clusters/ss/nodegroups/default-worker", nil)
	assert.NotContains(t, strs(g["node_addresses"]), n["address"])
	assert.Equal(t, float64(2), g["node_count"], "a stopped node still belongs to the group")
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_NODE_ACTION_NODE_STOP")["state"])

	code, _ := apiError(t, e.do("POST", "/v1/clusters/ss/nodegroups/default-worker/stop_node", map[string]any{"node_list": n["uuid"]}))
	assert.Equal(t, 400, code, "a stopped node cannot be stopped again")
	e.mustDo(202, "POST", "/v1/clusters/ss/nodegroups/default-worker/start_node", map[string]any{"node_list": n["uuid"]})
	e.srv.Clock.Advance(time.Minute)
	g = e.mustDo(200, "GET", "/v1/clusters/ss/nodegroups/default-worker", nil)
	assert.Contains(t, strs(g["node_addresses"]), n["address"])
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_NODE_ACTION_NODE_START")["state"])
	code, _ = apiError(t, e.do("POST", "/v1/clusters/ss/nodegroups/default-worker/stop_node", map[string]any{"node_list": "no-such-node"}))
	assert.Equal(t, 400, code)
}

func TestAutoscalerUserScriptAndFlavorChanges(t *testing.T) {
	e := start(t)
	id := e.createCluster("ops", nil)
	as := e.mustDo(200, "GET", "/v1/clusters/ops/nodegroups/default-worker/autoscale", nil)
	assert.Equal(t, false, as["ca_enable"])
	assert.Contains(t, as, "ca_scale_down_util_thresh")

	e.mustDo(202, "POST", "/v1/clusters/ops/nodegroups/default-worker/autoscale", map[string]any{
		"ca_enable": "True", "ca_min_node_count": "3", "ca_max_node_count": 6, "ca_scale_down_enable": "False",
	})
	e.srv.Clock.Advance(time.Minute)
	as = e.mustDo(200, "GET", "/v1/clusters/ops/nodegroups/default-worker/autoscale", nil)
	assert.Equal(t, true, as["ca_enable"])
	assert.Equal(t, float64(6), as["ca_max_node_count"])
	assert.Equal(t, false, as["ca_scale_down_enable"])
	g := e.mustDo(200, "GET", "/v1/clusters/ops/nodegroups/default-worker", nil)
	assert.Equal(t, float64(3), g["min_node_count"])
	assert.Equal(t, float64(3), g["node_count"], "the autoscaler brings the group to its minimum")
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_SET_CLUSTER_AUTOSCALER")["state"])
	code, detail := apiError(t, e.do("POST", "/v1/clusters/ops/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 4}))
	assert.Equal(t, 400, code, "the autoscaler owns the node count")
	assert.Contains(t, detail, "autoscaler")
	code, detail = apiError(t, e.do("POST", "/v1/clusters/ops/nodegroups/default-worker/autoscale",
		map[string]any{"ca_enable": "True", "ca_min_node_count": 5, "ca_max_node_count": 4}))
	assert.Equal(t, 400, code)
	assert.Contains(t, detail, "above ca_max_node_count")

	e.mustDo(202, "POST", "/v1/clusters/ops/nodegroups/default-master/userscript", map[string]any{"contents": "#!/bin/bash\necho hi\n"})
	e.srv.Clock.Advance(2 * time.Minute)
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_USERSCRIPT_UPDATE")["state"])
	assert.Equal(t, "default-master", e.lastEvent(id, "NODEGROUP_USERSCRIPT_UPDATE")["resource_name"])

	out := e.mustDo(202, "PATCH", "/v1/clusters/ops/nodegroups/default-worker", map[string]any{
		"type": "flavor_id", "flavor_id": "9e9e9e9e-1111-4222-8333-444444444444", "num_buffer_nodes": 1,
	})
	assert.Equal(t, g["uuid"], out["uuid"])
	e.srv.Clock.Advance(5 * time.Minute)
	g = e.mustDo(200, "GET", "/v1/clusters/ops/nodegroups/default-worker", nil)
	assert.Equal(t, "9e9e9e9e-1111-4222-8333-444444444444", g["flavor_id"])
	assert.Equal(t, "SUCCESS", e.lastEvent(id, "NODEGROUP_UPDATE_FLAVOR")["state"])
	code, _ = apiError(t, e.do("PATCH", "/v1/clusters/ops/nodegroups/default-worker", map[string]any{"type": "image", "flavor_id": "x"}))
	assert.Equal(t, 400, code)
}
