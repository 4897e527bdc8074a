package nks_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestATokenIsRequired(t *testing.T) {
	e := start(t)
	for name, tok := range map[string]string{"missing": "", "unknown": "forged-token"} {
		t.Run(name+" token answers 401", func(t *testing.T) {
			code, _ := apiError(t, e.do("GET", "/v1/clusters", nil, "X-Auth-Token", tok))
			assert.Equal(t, 401, code)
		})
	}

	t.Run("a token from the identity service works until it expires", func(t *testing.T) {
		conn := e.srv.Connections()["nks"]
		require.NotEmpty(t, conn["identity_url"], "identity runs on the same server")
		body, _ := json.Marshal(map[string]any{"auth": map[string]any{
			"tenantId":            conn["tenant_id"],
			"passwordCredentials": map[string]any{"username": conn["username"], "password": conn["password"]},
		}})
		resp, err := http.Post(conn["identity_url"].(string)+"/v2.0/tokens", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out struct {
			Access struct {
				Token struct{ ID string } `json:"token"`
			} `json:"access"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		tok := out.Access.Token.ID
		require.NotEmpty(t, tok)
		e.mustDo(200, "GET", "/v1/clusters", nil, "X-Auth-Token", tok)
		e.srv.Clock.Advance(13 * time.Hour)
		code, _ := apiError(t, e.do("GET", "/v1/clusters", nil, "X-Auth-Token", tok))
		assert.Equal(t, 401, code)
		e.mustDo(200, "GET", "/v1/clusters", nil) // the static token does not expire
	})
}

func TestTheVersionHeaderIsReadUnderBothNames(t *testing.T) {
	e := start(t)
	e.createCluster("v", nil)
	ng := "/v1/clusters/v/nodegroups"
	code, detail := apiError(t, e.do("GET", ng, nil, "OpenStack-API-Version", ""))
	assert.Equal(t, 406, code, "node-group calls need the version header")
	assert.Contains(t, detail, "container-infra latest")
	e.mustDo(200, "GET", ng, nil, "OpenStack-API-Version", "", "Platform-API-Version", "container-infra latest")
	e.mustDo(200, "GET", ng, nil, "OpenStack-API-Version", "container-infra 1.9")
	code, _ = apiError(t, e.do("GET", ng, nil, "OpenStack-API-Version", "container-infra 1.4"))
	assert.Equal(t, 406, code, "node groups arrived in 1.9")
	code, _ = apiError(t, e.do("GET", "/v1/clusters", nil, "OpenStack-API-Version", "compute 2.1"))
	assert.Equal(t, 406, code)
	e.mustDo(200, "GET", "/v1/clusters", nil, "OpenStack-API-Version", "")
}

func TestUnknownNamesDuplicatesAndBusyResources(t *testing.T) {
	e := start(t)
	e.createCluster("dup", nil)
	for _, p := range []string{"/v1/clusters/nope", "/v1/clusters/dup/nodegroups/nope", "/v1/clusters/nope/nodegroups",
		"/v1/clusters/dup/events/00000000-0000-4000-8000-000000000000"} {
		code, _ := apiError(t, e.do("GET", p, nil))
		assert.Equal(t, 404, code, p)
	}
	code, detail := apiError(t, e.do("POST", "/v1/clusters", createBody("dup", nil)))
	assert.Equal(t, 409, code)
	assert.Contains(t, detail, "dup")
	e.mustDo(202, "POST", "/v1/clusters/dup/nodegroups", ngBody("pool"))
	code, _ = apiError(t, e.do("POST", "/v1/clusters/dup/nodegroups", ngBody("pool")))
	assert.Equal(t, 409, code)

	code, detail = apiError(t, e.do("POST", "/v1/clusters/dup/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 3}))
	assert.Equal(t, 400, code, "the new group is still being created")
	assert.Contains(t, detail, "in progress")
	code, _ = apiError(t, e.do("POST", "/v1/clusters/dup/nodegroups/pool/upgrade", map[string]any{"version": "v1.29.3"}))
	assert.Equal(t, 400, code)
	e.srv.Clock.Advance(5 * time.Minute)
	e.mustDo(202, "POST", "/v1/clusters/dup/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 3})
	code, detail = apiError(t, e.do("DELETE", "/v1/clusters/dup", nil))
	assert.Equal(t, 400, code)
	assert.Contains(t, detail, "in progress")
}

func TestCreateEnforcesTheSpecLimits(t *testing.T) {
	e := start(t)
	require.Equal(t, 204, e.do("POST", "/_admin/versions", map[string]any{"v1.23.3": true}).status)
	require.Equal(t, 204, e.do("POST", "/_admin/subnets", map[string]any{"a1b2c3d4-0000-4000-8000-000000000002": "10.100.8.0/24"}).status)
	cases := []struct {
		name   string
		change func(body, labels map[string]any)
		want   string
	}{
		{"node count above 10", func(b, _ map[string]any) { b["node_count"] = 11 }, "between 1 and 10"},
		{"node count 0", func(b, _ map[string]any) { b["node_count"] = "0" }, "between 1 and 10"},
		{"pod subnet 29", func(_, l map[string]any) { l["pods_network_cidr"] = "10.96.0.0/16"; l["pods_network_subnet"] = 29 }, "too small"},
		{"pod subnet 19", func(_, l map[string]any) { l["pods_network_cidr"] = "10.96.0.0/16"; l["pods_network_subnet"] = "19" }, "too large"},
		{"pod subnet under prefix + 2", func(_, l map[string]any) {
			l["pods_network_cidr"] = "10.96.0.0/22"
			l["pods_network_subnet"] = "23"
		}, "at least 24"},
		{"a pod network smaller than /24", func(_, l map[string]any) { l["pods_network_cidr"] = "10.96.0.0/26" }, "smaller than /24"},
		{"a service network smaller than /24", func(_, l map[string]any) { l["service_cluster_ip_range"] = "10.254.0.0/30" }, "smaller than /24"},
		{"the internal band", func(_, l map[string]any) { l["pods_network_cidr"] = "198.18.0.0/20" }, "198.18.0.0/19"},
		{"the link-local band", func(_, l map[string]any) { l["service_cluster_ip_range"] = "169.254.0.0/16" }, "link-local"},
		{"pods over services", func(_, l map[string]any) {
			l["pods_network_cidr"] = "10.254.0.0/16"
		}, "overlaps the service network"},
		{"the VPC subnet inside the pod network", func(_, _ map[string]any) {}, "VPC subnet 10.100.8.0/24 overlaps the pod network"},
		{"the bridge range on v1.23.3", func(_, l map[string]any) {
			l["kube_tag"] = "v1.23.3"
			l["pods_network_cidr"] = "172.17.0.0/16"
		}, "bridge range"},
		{"an unsupported version", func(_, l map[string]any) { l["kube_tag"] = "v1.26.3" }, "Received invalid tag for kube_tag."},
		{"a wrong template", func(b, _ map[string]any) { b["cluster_template_id"] = "k8s" }, "iaas_console"},
		{"a missing label", func(_, l map[string]any) { delete(l, "boot_volume_size") }, "boot_volume_size"},
		{"cert_manager_api not True", func(_, l map[string]any) { l["cert_manager_api"] = "False" }, "cert_manager_api"},
		{"a flag not True/False", func(_, l map[string]any) { l["master_lb_floating_ip_enabled"] = "yes" }, "master_lb_floating_ip_enabled"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused with 400", func(t *testing.T) {
			r := e.do("POST", "/v1/clusters", createBody(strings.NewReplacer(" ", "-", "/", "-").Replace(tc.name), tc.change))
			code, detail := apiError(t, r)
			assert.Equal(t, 400, code)
			assert.Contains(t, detail, tc.want)
		})
	}
	t.Run("the bridge range is fine on later versions", func(t *testing.T) {
		e.mustDo(202, "POST", "/v1/clusters", createBody("newer", func(_, l map[string]any) {
			l["pods_network_cidr"] = "172.17.0.0/16"
		}))
	})
	assert.Len(t, e.mustDo(200, "GET", "/v1/clusters", nil)["clusters"], 1, "no refused create left a cluster")
}

func TestResizeCNIAndRollingBoundsAreEnforced(t *testing.T) {
	e := start(t)
	e.createCluster("lim", func(_, l map[string]any) { l["cni_driver"] = "flannel" })
	post := func(path string, body map[string]any) (int, string) {
		t.Helper()
		return apiError(t, e.do("POST", "/v1/clusters/lim"+path, body))
	}
	cases := []struct {
		name, path string
		body       map[string]any
		want       string
	}{
		{"resize to 11", "/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 11}, "between 1 and 10"},
		{"resize to 0", "/actions/resize", map[string]any{"nodegroup": "default-worker", "node_count": 0}, "between 1 and 10"},
		{"resize of the master", "/actions/resize", map[string]any{"nodegroup": "default-master", "node_count": 2}, "master"},
		{"a CNI other than calico", "/actions/cni_update", map[string]any{"cni": "cilium", "pod_cidr": "10.200.0.0/22", "pod_subnet": "24"}, "calico"},
		{"a CNI pod subnet of 29", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "10.200.0.0/16", "pod_subnet": "29"}, "too small"},
		{"a CNI pod network on the service network", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "10.254.0.0/22", "pod_subnet": "24"}, "service network"},
		{"a CNI pod network on the one in use", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "10.100.0.0/22", "pod_subnet": "24"}, "already used"},
		{"a CNI pod network on 198.18.0.0/19", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "198.18.0.0/22", "pod_subnet": "24"}, "internal band"},
		{"too many buffer nodes", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "10.200.0.0/22", "pod_subnet": "24", "num_buffer_nodes": 9}, "Buffer nodes 9"},
		{"more unavailable nodes than the cluster has", "/actions/cni_update", map[string]any{"cni": "calico", "pod_cidr": "10.200.0.0/22", "pod_subnet": "24", "num_max_unavailable_nodes": 3}, "more than the 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused with 400", func(t *testing.T) {
			code, detail := post(tc.path, tc.body)
			assert.Equal(t, 400, code)
			assert.Contains(t, detail, tc.want)
		})
	}
	for name, tc := range map[string]struct {
		body map[string]any
		want string
	}{
		"negative buffer nodes":                     {map[string]any{"num_buffer_nodes": -1}, "negative"},
		"no unavailable node allowed":               {map[string]any{"num_max_unavailable_nodes": 0}, "at least 1"},
		"more unavailable nodes than the group has": {map[string]any{"num_max_unavailable_nodes": 3}, "more than the 2"},
	} {
		t.Run(name+" on a flavor change are refused", func(t *testing.T) {
			tc.body["type"], tc.body["flavor_id"] = "flavor_id", "f2"
			code, detail := apiError(t, e.do("PATCH", "/v1/clusters/lim/nodegroups/default-worker", tc.body))
			assert.Equal(t, 400, code)
			assert.Contains(t, detail, tc.want)
		})
	}
	t.Run("worker upgrade bounds are refused", func(t *testing.T) {
		e.mustDo(202, "POST", "/v1/clusters/lim/nodegroups/default-master/upgrade", map[string]any{"version": "v1.30.3"})
		e.srv.Clock.Advance(5 * time.Minute)
		code, detail := post("/nodegroups/default-worker/upgrade", map[string]any{"version": "v1.30.3", "num_max_unavailable_nodes": 0})
		assert.Equal(t, 400, code)
		assert.Contains(t, detail, "at least 1")
		code, detail = post("/nodegroups/default-worker/upgrade", map[string]any{"version": "v1.30.3", "num_buffer_nodes": 20})
		assert.Equal(t, 400, code)
		assert.Contains(t, detail, "too many")
	})
	assert.Len(t, e.events(e.mustDo(200, "GET", "/v1/clusters/lim", nil)["uuid"].(string)), 2, "only the create and the master upgrade ran")
}

func TestConcurrentRequestsAreSafe(t *testing.T) {
	e := start(t)
	id := e.createCluster("busy", nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.do("GET", "/v1/clusters/busy", nil)
			e.do("GET", "/v1/clusters/"+id+"/events", nil)
			e.do("POST", "/v1/clusters/busy/nodegroups", ngBody("g"+string(rune('a'+i))))
			e.srv.Clock.Advance(time.Minute)
		}()
	}
	wg.Wait()
	e.srv.Clock.Advance(10 * time.Minute)
	groups := e.mustDo(200, "GET", "/v1/clusters/busy/nodegroups", nil)["nodegroups"].([]any)
	assert.Len(t, groups, 9)
	for _, g := range groups {
		assert.Equal(t, "COMPLETE", strings.SplitN(g.(map[string]any)["status"].(string), "_", 2)[1])
	}
}
