package nks

import (
	"context"
	"encoding/json"
	"net/http"
)

// Cluster is a cluster as read. The list answers only UUID, Name,
// FlavorID, Keypair, NodeCount, StackID, Status and Labels; the single
// read fills every field.
type Cluster struct {
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	FlavorID  string `json:"flavor_id"`
	Keypair   string `json:"keypair"`
	NodeCount int    `json:"node_count"`
	StackID   string `json:"stack_id"`
	Status    string `json:"status"`
	// StatusReason may be null ("").
	StatusReason  string   `json:"status_reason"`
	APIAddress    string   `json:"api_address"`
	ProjectID     string   `json:"project_id"`
	FixedNetwork  string   `json:"fixed_network"`
	FixedSubnet   string   `json:"fixed_subnet"`
	NodeAddresses []string `json:"node_addresses"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	Labels        Labels   `json:"labels"`

	// Extras seen in samples (not in the field table).
	HealthStatus       string          `json:"health_status,omitempty"`
	HealthStatusReason json.RawMessage `json:"health_status_reason,omitempty"`
	ClusterTemplateID  string          `json:"cluster_template_id,omitempty"`
	CreateTimeout      int             `json:"create_timeout,omitempty"`
	Links              []Link          `json:"links,omitempty"`
}

// KubeTag is the master node group's version (labels.kube_tag).
func (c *Cluster) KubeTag() string { return c.Labels["kube_tag"] }

// CreateClusterRequest is the body of POST /v1/clusters.
type CreateClusterRequest struct {
	Name    string `json:"name"`
	Keypair string `json:"keypair"`
	// ClusterTemplateID must be "iaas_console" (ClusterTemplateID); the
	// client fills it when empty.
	ClusterTemplateID string `json:"cluster_template_id"`
	// NodeCount is documented as a String and sent as an integer, as in
	// the spec's sample.
	NodeCount     int           `json:"node_count"`
	FlavorID      string        `json:"flavor_id"`
	FixedNetwork  string        `json:"fixed_network"`
	FixedSubnet   string        `json:"fixed_subnet"`
	CreateTimeout int           `json:"create_timeout,omitempty"`
	Labels        ClusterLabels `json:"labels"`
}

// ClusterLabels are the labels of a cluster create. All are strings except
// PodsNetworkSubnet (an integer in the spec). Required labels are always
// sent; optional ones only when set. Extra adds labels the table does not
// list (clusterautoscale, cni_driver, ...); a documented label wins over
// an Extra entry of the same name.
type ClusterLabels struct {
	AvailabilityZone          string `json:"availability_zone"`
	NodeImage                 string `json:"node_image"`
	BootVolumeType            string `json:"boot_volume_type"`
	BootVolumeSize            string `json:"boot_volume_size"`
	BootVolumeKeyID           string `json:"boot_volume_key_id,omitempty"`
	BootVolumeAppkey          string `json:"boot_volume_appkey,omitempty"`
	ExternalNetworkID         string `json:"external_network_id,omitempty"`
	ExternalSubnetIDList      string `json:"external_subnet_id_list,omitempty"`
	CertManagerAPI            string `json:"cert_manager_api"`
	CAEnable                  string `json:"ca_enable"`
	CAMaxNodeCount            string `json:"ca_max_node_count,omitempty"`
	CAMinNodeCount            string `json:"ca_min_node_count,omitempty"`
	CAScaleDownEnable         string `json:"ca_scale_down_enable,omitempty"`
	CAScaleDownUnneededTime   string `json:"ca_scale_down_unneeded_time,omitempty"`
	CAScaleDownUtilThresh     string `json:"ca_scale_down_util_thresh,omitempty"`
	CAScaleDownDelayAfterAdd  string `json:"ca_scale_down_delay_after_add,omitempty"`
	KubeTag                   string `json:"kube_tag"`
	UserScript                string `json:"user_script,omitempty"`
	UserScriptV2              string `json:"user_script_v2,omitempty"`
	MasterLBFloatingIPEnabled string `json:"master_lb_floating_ip_enabled"`
	StrictSGRules             string `json:"strict_sg_rules,omitempty"`
	AdditionalNetworkIDList   string `json:"additional_network_id_list,omitempty"`
	AdditionalSubnetIDList    string `json:"additional_subnet_id_list,omitempty"`
	ServiceClusterIPRange     string `json:"service_cluster_ip_range,omitempty"`
	PodsNetworkCIDR           string `json:"pods_network_cidr,omitempty"`
	PodsNetworkSubnet         int    `json:"pods_network_subnet,omitempty"`
	NCRSgw                    string `json:"ncr_sgw,omitempty"`
	OBSSgw                    string `json:"obs_sgw,omitempty"`

	Extra map[string]string `json:"-"`
}

// MarshalJSON writes the documented labels and the Extra ones.
func (l ClusterLabels) MarshalJSON() ([]byte, error) {
	type plain ClusterLabels
	return mergeExtra(plain(l), l.Extra)
}

// mergeExtra encodes v (a struct) and adds extra keys it does not have.
func mergeExtra(v any, extra map[string]string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, val := range extra {
		if _, ok := m[k]; !ok {
			m[k] = val
		}
	}
	return json.Marshal(m)
}

// ResizeRequest is the body of a resize.
type ResizeRequest struct {
	// NodeGroup is the target worker node group's name or UUID.
	NodeGroup string `json:"nodegroup"`
	NodeCount int    `json:"node_count"`
	// NodesToRemove names the nodes to delete when scaling down; without
	// it the service picks them at random.
	NodesToRemove []string `json:"nodes_to_remove,omitempty"`
}

// CNIUpdateRequest is the body of a CNI change.
type CNIUpdateRequest struct {
	CNI                    string `json:"cni"` // CNICalico
	NumBufferNodes         *int   `json:"num_buffer_nodes,omitempty"`
	NumMaxUnavailableNodes *int   `json:"num_max_unavailable_nodes,omitempty"`
	PodCIDR                string `json:"pod_cidr"`
	// PodSubnet is the pod subnet size as a string ("24").
	PodSubnet string `json:"pod_subnet"`
}

// IPACLTarget is one target of the API endpoint IP access control.
type IPACLTarget struct {
	CIDRAddress string `json:"cidr_address"`
	Description string `json:"description,omitempty"`
}

// IPACL is the API endpoint IP access control as read. When Enable is
// "false" only ClusterUUID and Enable are answered.
type IPACL struct {
	ClusterUUID string        `json:"cluster_uuid"`
	Enable      Text          `json:"enable"`
	Action      string        `json:"action,omitempty"`
	Targets     []IPACLTarget `json:"ipacl_targets,omitempty"`
}

// SetIPACLRequest is the body that sets the IP access control. When
// Enable is "false" the other fields are ignored by the service.
type SetIPACLRequest struct {
	Enable  string        `json:"enable"`           // "true" or "false"
	Action  string        `json:"action,omitempty"` // ALLOW or DENY
	Targets []IPACLTarget `json:"ipacl_targets,omitempty"`
}

// ListClusters lists the clusters (GET /v1/clusters). Each has the list
// fields only; GetCluster reads the rest.
func (c *Client) ListClusters(ctx context.Context) ([]Cluster, error) {
	var out struct {
		Clusters []Cluster `json:"clusters"`
	}
	if err := c.do(ctx, http.MethodGet, Path("clusters"), nil, &out); err != nil {
		return nil, err
	}
	return out.Clusters, nil
}

// GetCluster reads one cluster by UUID or name
// (GET /v1/clusters/{CLUSTER_ID_OR_NAME}). A 404 is a not_found error
// (after a delete: the delete finished).
func (c *Client) GetCluster(ctx context.Context, cluster string) (*Cluster, error) {
	if err := checkID("cluster", cluster); err != nil {
		return nil, err
	}
	var out Cluster
	if err := c.do(ctx, http.MethodGet, Path("clusters", cluster), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateCluster creates a cluster (POST /v1/clusters) and returns its
// UUID; the CLUSTER_CREATE task runs on. Mutating: never retried after a
// 5xx or network error (the outcome is unknown; the error's Data has
// "ambiguous": true and the caller reconciles by name).
func (c *Client) CreateCluster(ctx context.Context, req CreateClusterRequest) (string, error) {
	if req.ClusterTemplateID == "" {
		req.ClusterTemplateID = ClusterTemplateID
	}
	return c.post(ctx, http.MethodPost, Path("clusters"), req)
}

// DeleteCluster deletes a cluster (DELETE /v1/clusters/{CLUSTER_ID_OR_NAME});
// the CLUSTER_DELETE task runs on. Mutating: never retried after a 5xx or
// network error.
func (c *Client) DeleteCluster(ctx context.Context, cluster string) error {
	if err := checkID("cluster", cluster); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, Path("clusters", cluster), nil, nil)
}

// ResizeCluster changes a worker node group's node count
// (POST /v1/clusters/{CLUSTER_ID_OR_NAME}/actions/resize) and returns the
// cluster UUID; a CLUSTER_RESIZE task runs on. Mutating: never retried
// after a 5xx or network error.
func (c *Client) ResizeCluster(ctx context.Context, cluster string, req ResizeRequest) (string, error) {
	if err := checkID("cluster", cluster); err != nil {
		return "", err
	}
	return c.post(ctx, http.MethodPost, Path("clusters", cluster, "actions", "resize"), req)
}

// Kubeconfig returns the kubeconfig file body of a cluster
// (GET /v1/clusters/{CLUSTER_ID_OR_NAME}/config). It holds credentials:
// never log it.
func (c *Client) Kubeconfig(ctx context.Context, cluster string) (string, error) {
	if err := checkID("cluster", cluster); err != nil {
		return "", err
	}
	var out struct {
		Config string `json:"config"`
	}
	if err := c.do(ctx, http.MethodGet, Path("clusters", cluster, "config"), nil, &out); err != nil {
		return "", err
	}
	return out.Config, nil
}

// UpdateCNI changes the cluster network driver
// (POST /v1/clusters/{CLUSTER_ID_OR_NAME}/actions/cni_update) and returns
// the cluster UUID; a CLUSTER_CNI_UPDATE task runs on. Mutating: never
// retried after a 5xx or network error.
func (c *Client) UpdateCNI(ctx context.Context, cluster string, req CNIUpdateRequest) (string, error) {
	if err := checkID("cluster", cluster); err != nil {
		return "", err
	}
	return c.post(ctx, http.MethodPost, Path("clusters", cluster, "actions", "cni_update"), req)
}

// GetIPACL reads the API endpoint IP access control
// (GET /v1/clusters/{CLUSTER_ID_OR_NAME}/api_ep_ipacl).
func (c *Client) GetIPACL(ctx context.Context, cluster string) (*IPACL, error) {
	if err := checkID("cluster", cluster); err != nil {
		return nil, err
	}
	var out IPACL
	if err := c.do(ctx, http.MethodGet, Path("clusters", cluster, "api_ep_ipacl"), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetIPACL sets the API endpoint IP access control
// (POST /v1/clusters/{CLUSTER_ID_OR_NAME}/api_ep_ipacl) and returns the
// cluster UUID. Mutating: never retried after a 5xx or network error.
func (c *Client) SetIPACL(ctx context.Context, cluster string, req SetIPACLRequest) (string, error) {
	if err := checkID("cluster", cluster); err != nil {
		return "", err
	}
	return c.post(ctx, http.MethodPost, Path("clusters", cluster, "api_ep_ipacl"), req)
}
