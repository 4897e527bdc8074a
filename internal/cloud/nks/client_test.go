package nks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokens is a TokenSource that hands out tok-1, and tok-2 after an
// Invalidate of tok-1 (and so on).
type tokens struct {
	mu          sync.Mutex
	n           int
	invalidated []string
	static      bool
}

func (s *tokens) Token(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.n = 1
	}
	return "tok-" + string(rune('0'+s.n)), nil
}

func (s *tokens) Invalidate(t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidated = append(s.invalidated, t)
	if !s.static && t == "tok-"+string(rune('0'+s.n)) {
		s.n++
	}
}

// seen is one request the fake server received.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// answer is what the fake server replies.
type answer struct {
	status int
	body   string
	header map[string]string
}

type fake struct {
	mu      sync.Mutex
	reqs    []seen
	answers []answer // one per request; the last repeats
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{r.Method, r.URL.EscapedPath(), r.Header.Clone(), string(b)})
	a := f.answers[min(len(f.reqs), len(f.answers))-1]
	f.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// newClient starts a fake server answering answers in turn and a client
// for it whose sleeps are recorded, not waited.
func newClient(t *testing.T, answers ...answer) (*Client, *fake, *tokens, *[]time.Duration) {
	t.Helper()
	f := &fake{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	toks := &tokens{}
	var mu sync.Mutex
	var slept []time.Duration
	c, err := New(Config{BaseURL: srv.URL + "/nks/", Tokens: toks, Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		slept = append(slept, d)
		return ctx.Err()
	}})
	require.NoError(t, err)
	return c, f, toks, &slept
}

func ptr[T any](v T) *T { return &v }

func TestEveryOperationSendsTheSpecRequestAndReadsTheAnswer(t *testing.T) {
	ctx := context.Background()
	const uuidAns = `{"uuid":"c-uuid"}`
	for _, tc := range []struct {
		name   string
		call   func(c *Client) (any, error)
		method string
		path   string
		body   string // expected request JSON ("" = no body)
		status int
		answer string
		want   any
	}{
		{
			name:   "list clusters reads the clusters array",
			call:   func(c *Client) (any, error) { return c.ListClusters(ctx) },
			method: "GET", path: "/v1/clusters", status: 200,
			answer: `{"clusters":[{"uuid":"u1","name":"a","flavor_id":"f","keypair":"k","node_count":3,"stack_id":"s","status":"CREATE_COMPLETE","labels":{"kube_tag":"v1.28.3","clusterautoscale":true,"pods_network_subnet":24}}]}`,
			want: []Cluster{{UUID: "u1", Name: "a", FlavorID: "f", Keypair: "k", NodeCount: 3, StackID: "s", Status: "CREATE_COMPLETE",
				Labels: Labels{"kube_tag": "v1.28.3", "clusterautoscale": "True", "pods_network_subnet": "24"}}},
		},
		{
			name:   "get a cluster reads every field",
			call:   func(c *Client) (any, error) { return c.GetCluster(ctx, "prod") },
			method: "GET", path: "/v1/clusters/prod", status: 200,
			answer: `{"uuid":"u1","name":"prod","status":"CREATE_COMPLETE","status_reason":null,"api_address":"https://1.2.3.4:6443","project_id":"p","fixed_network":"n","fixed_subnet":"s","node_addresses":["10.0.0.4"],"created_at":"2024-02-27T06:12:15+00:00","updated_at":"2024-02-27T06:20:00+00:00","labels":{"kube_tag":"v1.27.3"},"health_status":"HEALTHY","health_status_reason":{"api":"ok"},"links":[{"href":"h","rel":"self"}],"create_timeout":60,"cluster_template_id":"iaas_console"}`,
			want: &Cluster{UUID: "u1", Name: "prod", Status: "CREATE_COMPLETE", APIAddress: "https://1.2.3.4:6443", ProjectID: "p", FixedNetwork: "n", FixedSubnet: "s",
				NodeAddresses: []string{"10.0.0.4"}, CreatedAt: "2024-02-27T06:12:15+00:00", UpdatedAt: "2024-02-27T06:20:00+00:00", Labels: Labels{"kube_tag": "v1.27.3"},
				HealthStatus: "HEALTHY", HealthStatusReason: json.RawMessage(`{"api":"ok"}`), Links: []Link{{"h", "self"}}, CreateTimeout: 60, ClusterTemplateID: "iaas_console"},
		},
		{
			name: "create a cluster sends the documented body and fills the template",
			call: func(c *Client) (any, error) {
				return c.CreateCluster(ctx, CreateClusterRequest{Name: "prod", Keypair: "kp", NodeCount: 3, FlavorID: "fl", FixedNetwork: "net", FixedSubnet: "sub",
					Labels: ClusterLabels{AvailabilityZone: "kr-pub-a", NodeImage: "img", BootVolumeType: "General HDD", BootVolumeSize: "50", CertManagerAPI: "True",
						CAEnable: "False", KubeTag: "v1.28.3", MasterLBFloatingIPEnabled: "True", PodsNetworkCIDR: "10.100.0.0/16", PodsNetworkSubnet: 24,
						Extra: map[string]string{"clusterautoscale": "nodegroupfeature", "kube_tag": "ignored"}}})
			},
			method: "POST", path: "/v1/clusters", status: 202, answer: uuidAns, want: "c-uuid",
			body: `{"name":"prod","keypair":"kp","cluster_template_id":"iaas_console","node_count":3,"flavor_id":"fl","fixed_network":"net","fixed_subnet":"sub",
				"labels":{"availability_zone":"kr-pub-a","node_image":"img","boot_volume_type":"General HDD","boot_volume_size":"50","cert_manager_api":"True",
				"ca_enable":"False","kube_tag":"v1.28.3","master_lb_floating_ip_enabled":"True","pods_network_cidr":"10.100.0.0/16","pods_network_subnet":24,
				"clusterautoscale":"nodegroupfeature"}}`,
		},
		{
			name:   "delete a cluster sends no body and reads none",
			call:   func(c *Client) (any, error) { return nil, c.DeleteCluster(ctx, "prod") },
			method: "DELETE", path: "/v1/clusters/prod", status: 204, want: nil,
		},
		{
			name: "resize sends the node group, count and nodes to remove",
			call: func(c *Client) (any, error) {
				return c.ResizeCluster(ctx, "prod", ResizeRequest{NodeGroup: "default-worker", NodeCount: 2, NodesToRemove: []string{"n1"}})
			},
			method: "POST", path: "/v1/clusters/prod/actions/resize", status: 202, answer: uuidAns, want: "c-uuid",
			body: `{"nodegroup":"default-worker","node_count":2,"nodes_to_remove":["n1"]}`,
		},
		{
			name:   "kubeconfig reads the config text",
			call:   func(c *Client) (any, error) { return c.Kubeconfig(ctx, "prod") },
			method: "GET", path: "/v1/clusters/prod/config", status: 200, answer: `{"config":"apiVersion: v1\nkind: Config\n"}`,
			want: "apiVersion: v1\nkind: Config\n",
		},
		{
			name: "a CNI change sends the pod network and optional node bounds",
			call: func(c *Client) (any, error) {
				return c.UpdateCNI(ctx, "prod", CNIUpdateRequest{CNI: "calico", NumBufferNodes: ptr(0), PodCIDR: "10.100.0.0/16", PodSubnet: "24"})
			},
			method: "POST", path: "/v1/clusters/prod/actions/cni_update", status: 202, answer: uuidAns, want: "c-uuid",
			body: `{"cni":"calico","num_buffer_nodes":0,"pod_cidr":"10.100.0.0/16","pod_subnet":"24"}`,
		},
		{
			name: "setting the IP access control sends enable, action and targets",
			call: func(c *Client) (any, error) {
				return c.SetIPACL(ctx, "prod", SetIPACLRequest{Enable: "true", Action: "ALLOW", Targets: []IPACLTarget{{"203.0.113.0/24", "office"}, {CIDRAddress: "198.51.100.7"}}})
			},
			method: "POST", path: "/v1/clusters/prod/api_ep_ipacl", status: 202, answer: uuidAns, want: "c-uuid",
			body: `{"enable":"true","action":"ALLOW","ipacl_targets":[{"cidr_address":"203.0.113.0/24","description":"office"},{"cidr_address":"198.51.100.7"}]}`,
		},
		{
			name:   "reading a disabled IP access control gets the UUID and enable only",
			call:   func(c *Client) (any, error) { return c.GetIPACL(ctx, "prod") },
			method: "GET", path: "/v1/clusters/prod/api_ep_ipacl", status: 200, answer: `{"cluster_uuid":"u1","enable":false}`,
			want: &IPACL{ClusterUUID: "u1", Enable: "False"},
		},
		{
			name:   "reading an enabled IP access control gets the targets",
			call:   func(c *Client) (any, error) { return c.GetIPACL(ctx, "prod") },
			method: "GET", path: "/v1/clusters/prod/api_ep_ipacl", status: 200,
			answer: `{"cluster_uuid":"u1","enable":"true","action":"DENY","ipacl_targets":[{"cidr_address":"10.0.0.0/8","description":"x"}]}`,
			want:   &IPACL{ClusterUUID: "u1", Enable: "true", Action: "DENY", Targets: []IPACLTarget{{"10.0.0.0/8", "x"}}},
		},
		{
			name:   "list node groups reads the nodegroups array",
			call:   func(c *Client) (any, error) { return c.ListNodeGroups(ctx, "prod") },
			method: "GET", path: "/v1/clusters/prod/nodegroups", status: 200,
			answer: `{"nodegroups":[{"uuid":"g1","name":"default-worker","flavor_id":"f","image_id":"i","max_node_count":null,"min_node_count":1,"node_count":3,"role":"worker","stack_id":"s","status":"UPDATE_COMPLETE"}]}`,
			want:   []NodeGroup{{UUID: "g1", Name: "default-worker", FlavorID: "f", ImageID: "i", MinNodeCount: ptr(1), NodeCount: 3, Role: "worker", StackID: "s", Status: "UPDATE_COMPLETE"}},
		},
		{
			name:   "get a node group by name",
			call:   func(c *Client) (any, error) { return c.GetNodeGroup(ctx, "prod", "pool a") },
			method: "GET", path: "/v1/clusters/prod/nodegroups/pool%20a", status: 200,
			answer: `{"uuid":"g2","name":"pool a","cluster_id":"u1","labels":{"kube_tag":"v1.27.3","ca_enable":"False"},"node_addresses":["10.0.0.9"],"is_default":false,"status_reason":null}`,
			want:   &NodeGroup{UUID: "g2", Name: "pool a", ClusterID: "u1", Labels: Labels{"kube_tag": "v1.27.3", "ca_enable": "False"}, NodeAddresses: []string{"10.0.0.9"}},
		},
		{
			name: "create a node group sends the documented body and reads the object",
			call: func(c *Client) (any, error) {
				return c.CreateNodeGroup(ctx, "prod", CreateNodeGroupRequest{Name: "pool-b", FlavorID: "f", ImageID: "i", NodeCount: 2,
					Labels: NodeGroupLabels{AvailabilityZone: "kr-pub-b", BootVolumeType: "General SSD", BootVolumeSize: "50", CAEnable: "True", CAMaxNodeCount: "5"}})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups", status: 202,
			body:   `{"name":"pool-b","flavor_id":"f","image_id":"i","node_count":2,"labels":{"availability_zone":"kr-pub-b","boot_volume_type":"General SSD","boot_volume_size":"50","ca_enable":"True","ca_max_node_count":"5"}}`,
			answer: `{"uuid":"g3","cluster_id":"u1","name":"pool-b","node_count":2,"role":"worker","project_id":"p","links":[{"href":"h","rel":"bookmark"}]}`,
			want:   &NodeGroup{UUID: "g3", ClusterID: "u1", Name: "pool-b", NodeCount: 2, Role: "worker", ProjectID: "p", Links: []Link{{"h", "bookmark"}}},
		},
		{
			name:   "delete a node group sends no body",
			call:   func(c *Client) (any, error) { return nil, c.DeleteNodeGroup(ctx, "prod", "pool-b") },
			method: "DELETE", path: "/v1/clusters/prod/nodegroups/pool-b", status: 204, want: nil,
		},
		{
			name: "stop nodes sends the colon-separated node list",
			call: func(c *Client) (any, error) {
				return c.StopNodes(ctx, "prod", "pool-b", NodeActionRequest{NodeList: JoinNodes("n1", "n2")})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups/pool-b/stop_node", status: 202, answer: `{"uuid":"g3"}`, want: "g3",
			body: `{"node_list":"n1:n2"}`,
		},
		{
			name: "start nodes sends the node list",
			call: func(c *Client) (any, error) {
				return c.StartNodes(ctx, "prod", "pool-b", NodeActionRequest{NodeList: "n1"})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups/pool-b/start_node", status: 202, answer: `{"uuid":"g3"}`, want: "g3",
			body: `{"node_list":"n1"}`,
		},
		{
			name:   "reading the autoscaler accepts booleans and numbers",
			call:   func(c *Client) (any, error) { return c.GetAutoscaler(ctx, "prod", "pool-b") },
			method: "GET", path: "/v1/clusters/prod/nodegroups/pool-b/autoscale", status: 200,
			answer: `{"ca_enable":true,"ca_max_node_count":10,"ca_min_node_count":"1","ca_scale_down_enable":false,"ca_scale_down_unneeded_time":10,"ca_scale_down_util_thresh":50,"ca_scale_down_delay_after_add":10,"ca_image":"img","clusterautoscale":"nodegroupfeature"}`,
			want: &Autoscaler{CAEnable: "True", CAMaxNodeCount: "10", CAMinNodeCount: "1", CAScaleDownEnable: "False", CAScaleDownUnneededTime: "10",
				CAScaleDownUtilThresh: "50", CAScaleDownDelayAfterAdd: "10", CAImage: "img", ClusterAutoscale: "nodegroupfeature"},
		},
		{
			name: "changing the autoscaler sends strings as documented",
			call: func(c *Client) (any, error) {
				return c.SetAutoscaler(ctx, "prod", "pool-b", AutoscalerRequest{CAEnable: "True", CAMaxNodeCount: "5", CAScaleDownEnable: "False"})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups/pool-b/autoscale", status: 202, answer: `{"uuid":"g3"}`, want: "g3",
			body: `{"ca_enable":"True","ca_max_node_count":"5","ca_scale_down_enable":"False"}`,
		},
		{
			name: "upgrade sends the version and node bounds",
			call: func(c *Client) (any, error) {
				return c.UpgradeNodeGroup(ctx, "prod", MasterNodeGroup, UpgradeRequest{Version: "v1.28.3", NumBufferNodes: ptr(1), NumMaxUnavailableNodes: ptr(2)})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups/default-master/upgrade", status: 202, answer: `{"uuid":"m1"}`, want: "m1",
			body: `{"version":"v1.28.3","num_buffer_nodes":1,"num_max_unavailable_nodes":2}`,
		},
		{
			name: "changing the user script sends its contents",
			call: func(c *Client) (any, error) {
				return c.SetUserScript(ctx, "prod", "pool-b", UserScriptRequest{Contents: "#!/bin/sh\necho hi\n"})
			},
			method: "POST", path: "/v1/clusters/prod/nodegroups/pool-b/userscript", status: 202, answer: `{"uuid":"g3"}`, want: "g3",
			body: `{"contents":"#!/bin/sh\necho hi\n"}`,
		},
		{
			name: "changing the flavor is a PATCH with type flavor_id",
			call: func(c *Client) (any, error) {
				return c.ChangeFlavor(ctx, "prod", "pool-b", FlavorChangeRequest{FlavorID: "f2"})
			},
			method: "PATCH", path: "/v1/clusters/prod/nodegroups/pool-b", status: 202, answer: `{"uuid":"g3"}`, want: "g3",
			body: `{"type":"flavor_id","flavor_id":"f2"}`,
		},
		{
			name:   "list task history reads the events array",
			call:   func(c *Client) (any, error) { return c.ListTasks(ctx, "u1") },
			method: "GET", path: "/v1/clusters/u1/events", status: 200,
			answer: `{"events":[{"id":7,"uuid":"e7","project_id":"p","cluster_uuid":"u1","cluster_name":"prod","resource_uuid":"g3","resource_name":"pool-b","resource_type":"nodegroup","type":"NODEGROUP_UPGRADE","state":"IN_PROGRESS","contents":"upgrading","created_at":"2024-02-27T06:12:15+00:00","updated_at":null}]}`,
			want: []Task{{ID: 7, UUID: "e7", ProjectID: "p", ClusterUUID: "u1", ClusterName: "prod", ResourceUUID: "g3", ResourceName: "pool-b", ResourceType: "nodegroup",
				Type: "NODEGROUP_UPGRADE", State: "IN_PROGRESS", Contents: "upgrading", CreatedAt: "2024-02-27T06:12:15+00:00"}},
		},
		{
			name:   "get a task accepts resource.name and a null contents",
			call:   func(c *Client) (any, error) { return c.GetTask(ctx, "u1", "e7") },
			method: "GET", path: "/v1/clusters/u1/events/e7", status: 200,
			answer: `{"id":7,"uuid":"e7","resource_uuid":"g3","resource":{"name":"pool-b"},"type":"NODEGROUP_UPGRADE","state":"SUCCESS","contents":null}`,
			want:   &Task{ID: 7, UUID: "e7", ResourceUUID: "g3", ResourceName: "pool-b", Type: "NODEGROUP_UPGRADE", State: "SUCCESS"},
		},
		{
			name:   "supported versions read both maps",
			call:   func(c *Client) (any, error) { return c.Supports(ctx) },
			method: "GET", path: "/v1/supports", status: 200,
			answer: `{"supported_k8s":{"v1.27.3":true,"v1.28.3":true,"v1.26.3":false},"supported_event_type":{"cluster_events":{"CLUSTER_CREATE":"Create a cluster"},"nodegroup_events":{"NODEGROUP_UPGRADE":"Upgrade a node group"}}}`,
			want: func() *Supports {
				s := &Supports{SupportedK8s: map[string]bool{"v1.27.3": true, "v1.28.3": true, "v1.26.3": false}}
				s.SupportedEventType.ClusterEvents = map[string]string{"CLUSTER_CREATE": "Create a cluster"}
				s.SupportedEventType.NodeGroupEvents = map[string]string{"NODEGROUP_UPGRADE": "Upgrade a node group"}
				return s
			}(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f, _, _ := newClient(t, answer{status: tc.status, body: tc.answer})
			got, err := tc.call(c)
			require.NoError(t, err)
			reqs := f.requests()
			require.Len(t, reqs, 1)
			r := reqs[0]
			assert.Equal(t, tc.method, r.Method)
			assert.Equal(t, "/nks"+tc.path, r.Path)
			assert.Equal(t, "tok-1", r.Header.Get("X-Auth-Token"))
			assert.Equal(t, "container-infra latest", r.Header.Get("Platform-API-Version"))
			assert.Equal(t, "container-infra latest", r.Header.Get("OpenStack-API-Version"))
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.Equal(t, "application/json", r.Header.Get("Accept"))
			if tc.body == "" {
				assert.Empty(t, r.Body)
			} else {
				assert.JSONEq(t, tc.body, r.Body)
			}
			if tc.want == nil {
				assert.Nil(t, got)
			} else {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}
