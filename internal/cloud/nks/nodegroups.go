package nks

import (
	"context"
	"net/http"
	"strings"
)

// NodeGroup is a node group as read. The list answers UUID, FlavorID,
// ImageID, MaxNodeCount, MinNodeCount, Name, NodeCount, Role, StackID and
// Status; the single read fills the rest; a create answers the object
// with ClusterID, Labels, ProjectID and Links.
type NodeGroup struct {
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	ClusterID    string `json:"cluster_id,omitempty"`
	FlavorID     string `json:"flavor_id"`
	ImageID      string `json:"image_id"`
	Labels       Labels `json:"labels,omitempty"`
	MaxNodeCount *int   `json:"max_node_count"`
	MinNodeCount *int   `json:"min_node_count"`
	NodeCount    int    `json:"node_count"`
	// NodeAddresses are the node IPs (single read).
	NodeAddresses []string `json:"node_addresses,omitempty"`
	ProjectID     string   `json:"project_id,omitempty"`
	Role          string   `json:"role"`
	StackID       string   `json:"stack_id"`
	Status        string   `json:"status"`
	StatusReason  string   `json:"status_reason,omitempty"`
	CreatedAt     string   `json:"created_at,omitempty"`
	UpdatedAt     string   `json:"updated_at,omitempty"`
	IsDefault     bool     `json:"is_default,omitempty"`
	Links         []Link   `json:"links,omitempty"`
}

// KubeTag is the node group's version (labels.kube_tag; single read).
func (g *NodeGroup) KubeTag() string { return g.Labels["kube_tag"] }

// IsMaster reports whether the group is the master node group.
func (g *NodeGroup) IsMaster() bool { return g.Name == MasterNodeGroup || g.Role == "master" }

// CreateNodeGroupRequest is the body of a node group create.
type CreateNodeGroupRequest struct {
	Name     string `json:"name"`
	FlavorID string `json:"flavor_id"`
	ImageID  string `json:"image_id"`
	// NodeCount defaults to 1 on the service when 0 (omitted).
	NodeCount int             `json:"node_count,omitempty"`
	Labels    NodeGroupLabels `json:"labels"`
}

// NodeGroupLabels are the labels of a node group create, all strings.
// Required labels are always sent; optional ones only when set; Extra adds
// labels the table does not list.
type NodeGroupLabels struct {
	AvailabilityZone         string `json:"availability_zone"`
	BootVolumeType           string `json:"boot_volume_type"`
	BootVolumeSize           string `json:"boot_volume_size"`
	CAEnable                 string `json:"ca_enable"`
	CAMaxNodeCount           string `json:"ca_max_node_count,omitempty"`
	CAMinNodeCount           string `json:"ca_min_node_count,omitempty"`
	CAScaleDownEnable        string `json:"ca_scale_down_enable,omitempty"`
	CAScaleDownUnneededTime  string `json:"ca_scale_down_unneeded_time,omitempty"`
	CAScaleDownUtilThresh    string `json:"ca_scale_down_util_thresh,omitempty"`
	CAScaleDownDelayAfterAdd string `json:"ca_scale_down_delay_after_add,omitempty"`
	UserScript               string `json:"user_script,omitempty"`
	UserScriptV2             string `json:"user_script_v2,omitempty"`
	AdditionalNetworkIDList  string `json:"additional_network_id_list,omitempty"`
	AdditionalSubnetIDList   string `json:"additional_subnet_id_list,omitempty"`

	Extra map[string]string `json:"-"`
}

// MarshalJSON writes the documented labels and the Extra ones.
func (l NodeGroupLabels) MarshalJSON() ([]byte, error) {
	type plain NodeGroupLabels
	return mergeExtra(plain(l), l.Extra)
}

// NodeActionRequest is the body of stop_node and start_node.
type NodeActionRequest struct {
	// NodeList is node instance UUIDs separated by ':' (JoinNodes).
	NodeList string `json:"node_list"`
}

// JoinNodes builds a node_list from node instance UUIDs.
func JoinNodes(ids ...string) string { return strings.Join(ids, ":") }

// Autoscaler is a node group's autoscaler settings as read. The spec
// documents strings (flags True/False); samples show booleans and
// integers, which Text accepts.
type Autoscaler struct {
	CAEnable                 Text `json:"ca_enable"`
	CAMaxNodeCount           Text `json:"ca_max_node_count"`
	CAMinNodeCount           Text `json:"ca_min_node_count"`
	CAScaleDownEnable        Text `json:"ca_scale_down_enable"`
	CAScaleDownUnneededTime  Text `json:"ca_scale_down_unneeded_time"`
	CAScaleDownUtilThresh    Text `json:"ca_scale_down_util_thresh"`
	CAScaleDownDelayAfterAdd Text `json:"ca_scale_down_delay_after_add"`
	// Extras seen in the read sample.
	CAImage          Text `json:"ca_image,omitempty"`
	ClusterAutoscale Text `json:"clusterautoscale,omitempty"`
}

// AutoscalerRequest is the body of an autoscaler change, strings as
// documented; CAEnable ("True"/"False") is required.
type AutoscalerRequest struct {
	CAEnable                 string `json:"ca_enable"`
	CAMaxNodeCount           string `json:"ca_max_node_count,omitempty"`
	CAMinNodeCount           string `json:"ca_min_node_count,omitempty"`
	CAScaleDownEnable        string `json:"ca_scale_down_enable,omitempty"`
	CAScaleDownUnneededTime  string `json:"ca_scale_down_unneeded_time,omitempty"`
	CAScaleDownUtilThresh    string `json:"ca_scale_down_util_thresh,omitempty"`
	CAScaleDownDelayAfterAdd string `json:"ca_scale_down_delay_after_add,omitempty"`
}

// UpgradeRequest is the body of a node group upgrade.
type UpgradeRequest struct {
	Version                string `json:"version"`
	NumBufferNodes         *int   `json:"num_buffer_nodes,omitempty"`
	NumMaxUnavailableNodes *int   `json:"num_max_unavailable_nodes,omitempty"`
}

// UserScriptRequest is the body of a user script change.
type UserScriptRequest struct {
	Contents string `json:"contents"`
}

// FlavorChangeRequest is the body of an instance flavor change (PATCH on
// the node group). Type must be "flavor_id" (FlavorChangeType); the client
// fills it when empty.
type FlavorChangeRequest struct {
	Type                   string `json:"type"`
	FlavorID               string `json:"flavor_id"`
	NumBufferNodes         *int   `json:"num_buffer_nodes,omitempty"`
	NumMaxUnavailableNodes *int   `json:"num_max_unavailable_nodes,omitempty"`
}

func groupPath(cluster, group string, rest ...string) (string, error) {
	if err := checkID("cluster", cluster); err != nil {
		return "", err
	}
	if err := checkID("node group", group); err != nil {
		return "", err
	}
	return Path(append([]string{"clusters", cluster, "nodegroups", group}, rest...)...), nil
}

// postGroup sends req to the node group's action (POST
// .../nodegroups/{NODEGROUP}/{action}) and returns the node group UUID.
func (c *Client) postGroup(ctx context.Context, cluster, group, action string, req any) (string, error) {
	p, err := groupPath(cluster, group, action)
	if err != nil {
		return "", err
	}
	return c.post(ctx, http.MethodPost, p, req)
}

// ListNodeGroups lists a cluster's node groups
// (GET /v1/clusters/{CLUSTER_ID_OR_NAME}/nodegroups), with the list fields.
func (c *Client) ListNodeGroups(ctx context.Context, cluster string) ([]NodeGroup, error) {
	if err := checkID("cluster", cluster); err != nil {
		return nil, err
	}
	var out struct {
		NodeGroups []NodeGroup `json:"nodegroups"`
	}
	if err := c.do(ctx, http.MethodGet, Path("clusters", cluster, "nodegroups"), nil, &out); err != nil {
		return nil, err
	}
	return out.NodeGroups, nil
}

// GetNodeGroup reads one node group by UUID or name
// (GET /v1/clusters/{CLUSTER_ID_OR_NAME}/nodegroups/{NODEGROUP_ID_OR_NAME}).
// The real service refuses default-master with 403.
func (c *Client) GetNodeGroup(ctx context.Context, cluster, group string) (*NodeGroup, error) {
	p, err := groupPath(cluster, group)
	if err != nil {
		return nil, err
	}
	var out NodeGroup
	if err := c.do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateNodeGroup creates a node group
// (POST /v1/clusters/{CLUSTER_ID_OR_NAME}/nodegroups) and returns the
// object the service answers; the NODEGROUP_CREATE task runs on.
// Mutating: never retried after a 5xx or network error (reconcile by name).
func (c *Client) CreateNodeGroup(ctx context.Context, cluster string, req CreateNodeGroupRequest) (*NodeGroup, error) {
	if err := checkID("cluster", cluster); err != nil {
		return nil, err
	}
	var out NodeGroup
	if err := c.do(ctx, http.MethodPost, Path("clusters", cluster, "nodegroups"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteNodeGroup deletes a node group
// (DELETE /v1/clusters/{CLUSTER_ID_OR_NAME}/nodegroups/{NODEGROUP_ID_OR_NAME});
// the NODEGROUP_DELETE task runs on. Mutating: never retried after a 5xx
// or network error.
func (c *Client) DeleteNodeGroup(ctx context.Context, cluster, group string) error {
	p, err := groupPath(cluster, group)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil)
}

// StopNodes stops worker nodes (POST .../nodegroups/{NODEGROUP}/stop_node)
// and returns the node group UUID; a NODEGROUP_NODE_ACTION_NODE_STOP task
// runs on. Mutating: never retried after a 5xx or network error.
func (c *Client) StopNodes(ctx context.Context, cluster, group string, req NodeActionRequest) (string, error) {
	return c.postGroup(ctx, cluster, group, "stop_node", req)
}

// StartNodes starts worker nodes (POST .../nodegroups/{NODEGROUP}/start_node)
// and returns the node group UUID; a NODEGROUP_NODE_ACTION_NODE_START task
// runs on. Mutating: never retried after a 5xx or network error.
func (c *Client) StartNodes(ctx context.Context, cluster, group string, req NodeActionRequest) (string, error) {
	return c.postGroup(ctx, cluster, group, "start_node", req)
}

// GetAutoscaler reads a node group's autoscaler settings
// (GET .../nodegroups/{NODEGROUP}/autoscale).
func (c *Client) GetAutoscaler(ctx context.Context, cluster, group string) (*Autoscaler, error) {
	p, err := groupPath(cluster, group, "autoscale")
	if err != nil {
		return nil, err
	}
	var out Autoscaler
	if err := c.do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetAutoscaler changes a node group's autoscaler settings
// (POST .../nodegroups/{NODEGROUP}/autoscale) and returns the node group
// UUID; a NODEGROUP_SET_CLUSTER_AUTOSCALER task runs on. Mutating: never
// retried after a 5xx or network error.
func (c *Client) SetAutoscaler(ctx context.Context, cluster, group string, req AutoscalerRequest) (string, error) {
	return c.postGroup(ctx, cluster, group, "autoscale", req)
}

// UpgradeNodeGroup upgrades a node group (POST .../nodegroups/{NODEGROUP}/upgrade;
// MasterNodeGroup for the master components, which go first) and returns
// the node group UUID; a NODEGROUP_UPGRADE task runs on. Mutating: never
// retried after a 5xx or network error.
func (c *Client) UpgradeNodeGroup(ctx context.Context, cluster, group string, req UpgradeRequest) (string, error) {
	return c.postGroup(ctx, cluster, group, "upgrade", req)
}

// SetUserScript changes a node group's user script
// (POST .../nodegroups/{NODEGROUP}/userscript; MasterNodeGroup for the
// master) and returns the node group UUID; a NODEGROUP_USERSCRIPT_UPDATE
// task runs on. Mutating: never retried after a 5xx or network error.
func (c *Client) SetUserScript(ctx context.Context, cluster, group string, req UserScriptRequest) (string, error) {
	return c.postGroup(ctx, cluster, group, "userscript", req)
}

// ChangeFlavor changes a node group's instance flavor
// (PATCH /v1/clusters/{CLUSTER_ID_OR_NAME}/nodegroups/{NODEGROUP_ID_OR_NAME})
// and returns the node group UUID; a NODEGROUP_UPDATE_FLAVOR task runs on.
// Mutating: never retried after a 5xx or network error.
func (c *Client) ChangeFlavor(ctx context.Context, cluster, group string, req FlavorChangeRequest) (string, error) {
	p, err := groupPath(cluster, group)
	if err != nil {
		return "", err
	}
	if req.Type == "" {
		req.Type = FlavorChangeType
	}
	return c.post(ctx, http.MethodPatch, p, req)
}
