package nks

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// nodeGroupView is a node group as steps output it.
func nodeGroupView(g *nks.NodeGroup) map[string]any {
	opt := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return map[string]any{
		"uuid": g.UUID, "name": g.Name, "cluster_id": g.ClusterID, "status": g.Status, "status_reason": g.StatusReason,
		"node_count": g.NodeCount, "min_node_count": opt(g.MinNodeCount), "max_node_count": opt(g.MaxNodeCount),
		"kube_tag": g.KubeTag(), "flavor_id": g.FlavorID, "image_id": g.ImageID, "role": g.Role,
		"stack_id": g.StackID, "node_addresses": strList(g.NodeAddresses), "project_id": g.ProjectID,
		"created_at": g.CreatedAt, "updated_at": g.UpdatedAt, "is_default": g.IsDefault, "labels": labelMap(g.Labels),
	}
}

// groupCall is the common shape of a node group mutation answering the
// group's UUID.
func groupCall(r groupRefParams, send func(ctx context.Context, cl *nks.Client) (string, error)) func(context.Context, *nks.Client, string) (mutationResult, error) {
	return func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error) {
		id, err := send(ctx, cl)
		if err != nil {
			return mutationResult{}, err
		}
		return mutationResult{ClusterUUID: clusterUUID, ResourceUUID: id,
			Outputs: steps.Outputs{"uuid": id, "cluster_uuid": clusterUUID}}, nil
	}
}

var groupOutputs = withWaitOutputs(
	steps.Output{Name: "uuid", Type: "string", Description: "the node group's UUID"},
	steps.Output{Name: "cluster_uuid", Type: "string", Description: "the cluster's UUID"},
)

// ---- nks.nodegroup.list, nks.nodegroup.get -----------------------------------

type listGroupsParams struct {
	connParam
	clusterParam
}

func init() {
	steps.Register(steps.Define(steps.Def[listGroupsParams]{
		Type:    "nks.nodegroup.list",
		Summary: "List a cluster's node groups (uuid, name, flavor_id, image_id, min/max_node_count, node_count, role, stack_id, status).",
		Example: map[string]any{"cluster": "prod"},
		Outputs: []steps.Output{
			{Name: "nodegroups", Type: "list", Description: "node groups as maps (see nks.nodegroup.get)"},
			{Name: "count", Type: "integer", Description: "number of node groups"},
		},
		Check: (*listGroupsParams).checkRef,
		Plan: func(p *listGroupsParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "nodegroups")}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *listGroupsParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				list, err := cl.ListNodeGroups(ctx, p.Cluster)
				if err != nil {
					return nil, err
				}
				out := make([]any, len(list))
				for i := range list {
					out[i] = nodeGroupView(&list[i])
				}
				return steps.Outputs{"nodegroups": out, "count": len(list)}, nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[groupRefParams]{
		Type:    "nks.nodegroup.get",
		Summary: "Read one node group by name or UUID (the service refuses default-master).",
		Example: map[string]any{"cluster": "prod", "nodegroup": "pool-b"},
		Outputs: []steps.Output{
			{Name: "nodegroup", Type: "map", Description: "the node group: uuid, name, cluster_id, status, node_count, kube_tag, node_addresses, labels, ..."},
			{Name: "uuid", Type: "string", Description: "node group UUID"},
			{Name: "name", Type: "string", Description: "node group name"},
			{Name: "status", Type: "string", Description: "node group status"},
			{Name: "node_count", Type: "integer", Description: "nodes in the group"},
			{Name: "kube_tag", Type: "string", Description: "the group's version"},
		},
		Check: (*groupRefParams).checkRef,
		Plan: func(p *groupRefParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: groupPlanPath(*p)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *groupRefParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				g, err := cl.GetNodeGroup(ctx, p.Cluster, p.NodeGroup)
				if err != nil {
					return nil, err
				}
				return steps.Outputs{"nodegroup": nodeGroupView(g), "uuid": g.UUID, "name": g.Name,
					"status": g.Status, "node_count": g.NodeCount, "kube_tag": g.KubeTag()}, nil
			})
		},
	}))
}

// ---- nks.nodegroup.create, nks.nodegroup.delete ------------------------------

// userScripts are the user scripts of a cluster's or node group's labels:
// a node's shell runs them, so a ${{ }} in them reaches it as a variable
// set at the script's top (steps.Script).
var userScripts = []steps.Script{
	{Param: "labels.user_script", Instead: userScriptInstead},
	{Param: "labels.user_script_v2", Instead: userScriptInstead},
}

const userScriptInstead = "write the script itself in the playbook, with ${{ }} only for the values it reads"

type createGroupLabels struct {
	AvailabilityZone string `json:"availability_zone" required:"true" desc:"availability zone"`
	BootVolumeType   string `json:"boot_volume_type" required:"true" desc:"block storage type"`
	BootVolumeSize   int    `json:"boot_volume_size" required:"true" min:"1" desc:"block storage size in GB"`
	CAEnable         bool   `json:"ca_enable" default:"false" desc:"enable the autoscaler"`
	caSettings
	UserScript              string   `json:"user_script" desc:"user script (old)"`
	UserScriptV2            string   `json:"user_script_v2" desc:"user script"`
	AdditionalNetworkIDList []string `json:"additional_network_id_list" desc:"additional VPC networks (sent colon-separated)"`
	AdditionalSubnetIDList  []string `json:"additional_subnet_id_list" desc:"additional VPC subnets (sent colon-separated)"`
}

type createGroupParams struct {
	connParam
	clusterParam
	Name        string            `json:"name" required:"true" maxlen:"255" desc:"node group name"`
	FlavorID    string            `json:"flavor_id" required:"true" desc:"flavor UUID of the nodes"`
	ImageID     string            `json:"image_id" required:"true" desc:"base image UUID"`
	NodeCount   int               `json:"node_count" default:"1" min:"1" desc:"nodes"`
	Labels      createGroupLabels `json:"labels" required:"true" desc:"node group labels"`
	ExtraLabels map[string]string `json:"extra_labels" desc:"labels the spec does not list; a listed label wins"`
	waitParams
}

func createGroupRequest(p *createGroupParams) nks.CreateNodeGroupRequest {
	l := p.Labels
	var extra map[string]string
	if len(p.ExtraLabels) > 0 {
		extra = p.ExtraLabels
	}
	return nks.CreateNodeGroupRequest{
		Name: p.Name, FlavorID: p.FlavorID, ImageID: p.ImageID, NodeCount: p.NodeCount,
		Labels: nks.NodeGroupLabels{
			AvailabilityZone: l.AvailabilityZone, BootVolumeType: l.BootVolumeType, BootVolumeSize: strconv.Itoa(l.BootVolumeSize),
			CAEnable: flag(l.CAEnable), CAMaxNodeCount: optInt(l.CAMaxNodeCount), CAMinNodeCount: optInt(l.CAMinNodeCount),
			CAScaleDownEnable: optFlag(l.CAScaleDownEnable), CAScaleDownUnneededTime: optInt(l.CAScaleDownUnneededTime),
			CAScaleDownUtilThresh: optInt(l.CAScaleDownUtilThresh), CAScaleDownDelayAfterAdd: optInt(l.CAScaleDownDelayAfterAdd),
			UserScript: l.UserScript, UserScriptV2: l.UserScriptV2,
			AdditionalNetworkIDList: strings.Join(l.AdditionalNetworkIDList, ":"), AdditionalSubnetIDList: strings.Join(l.AdditionalSubnetIDList, ":"),
			Extra: extra,
		},
	}
}

func init() {
	steps.Register(steps.Define(steps.Def[createGroupParams]{
		Type:     "nks.nodegroup.create",
		Summary:  "Create a worker node group. With wait, the step ends when the NODEGROUP_CREATE task succeeds.",
		Mutating: true,
		Scripts:  userScripts,
		Example: map[string]any{"cluster": "prod", "name": "pool-b", "flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
			"image_id": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11", "node_count": 2,
			"labels": map[string]any{"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD", "boot_volume_size": 50}},
		Outputs: withWaitOutputs(
			steps.Output{Name: "uuid", Type: "string", Description: "the new node group's UUID"},
			steps.Output{Name: "name", Type: "string", Description: "its name"},
			steps.Output{Name: "cluster_uuid", Type: "string", Description: "the cluster's UUID"},
		),
		Reconcile: reconcileNodeGroupCreate,
		Check: func(p *createGroupParams, dyn map[string]bool) []fault.Problem {
			var ps problems
			ps.name(dyn, "cluster", "cluster", p.Cluster)
			ps.name(dyn, "name", "node group", p.Name)
			if !dyn["labels"] {
				p.Labels.caSettings.check(&ps, "labels.")
			}
			return ps
		},
		Plan: func(p *createGroupParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: nks.Path("clusters", p.Cluster, "nodegroups"), Body: createGroupRequest(p)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *createGroupParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupCreate,
				call: func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error) {
					g, err := cl.CreateNodeGroup(ctx, p.Cluster, createGroupRequest(p))
					if err != nil {
						return mutationResult{}, err
					}
					if g.ClusterID != "" {
						clusterUUID = g.ClusterID
					}
					return mutationResult{ClusterUUID: clusterUUID, ResourceUUID: g.UUID,
						Outputs: steps.Outputs{"uuid": g.UUID, "name": g.Name, "cluster_uuid": clusterUUID}}, nil
				}})
		},
	}))

	type deleteGroupParams struct {
		groupRefParams
		waitParams
	}
	steps.Register(steps.Define(steps.Def[deleteGroupParams]{
		Type:     "nks.nodegroup.delete",
		Summary:  "Delete a node group (the service refuses the last one). With wait, the step ends when the NODEGROUP_DELETE task succeeds.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "nodegroup": "pool-b"},
		Outputs:  groupOutputs,
		Check:    (*deleteGroupParams).checkRef,
		Plan: func(p *deleteGroupParams) []steps.PlannedCall {
			r := p.groupRefParams
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: groupPlanPath(r), Note: "reads the node group's UUID"},
				{Method: http.MethodDelete, Path: groupPlanPath(r)},
			}
		},
		Run: func(ctx context.Context, c *steps.Call, p *deleteGroupParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupDelete,
				call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
					g, err := cl.GetNodeGroup(ctx, p.Cluster, p.NodeGroup)
					if err != nil {
						return "", err
					}
					return g.UUID, cl.DeleteNodeGroup(ctx, p.Cluster, g.UUID)
				})})
		},
	}))
}

// ---- nks.nodegroup.upgrade, .userscript, .flavor -------------------------------

type upgradeGroupParams struct {
	groupRefParams
	Version string `json:"version" required:"true" pattern:"^v(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)$" like:"v1.28.3" desc:"target version, like v1.30.3 (must be supported by /v1/supports)"`
	rolling
	waitParams
}

type userScriptParams struct {
	groupRefParams
	Contents string `json:"contents" required:"true" desc:"the user script (default-master for the master components)"`
	waitParams
}

type flavorParams struct {
	groupRefParams
	Type     string `json:"type" default:"flavor_id" enum:"flavor_id" desc:"what changes: the flavor"`
	FlavorID string `json:"flavor_id" required:"true" desc:"the new flavor UUID"`
	rolling
	waitParams
}

func upgradeRequest(p *upgradeGroupParams) nks.UpgradeRequest {
	return nks.UpgradeRequest{Version: p.Version, NumBufferNodes: p.NumBufferNodes, NumMaxUnavailableNodes: p.NumMaxUnavailableNodes}
}

func flavorRequest(p *flavorParams) nks.FlavorChangeRequest {
	return nks.FlavorChangeRequest{Type: p.Type, FlavorID: p.FlavorID, NumBufferNodes: p.NumBufferNodes, NumMaxUnavailableNodes: p.NumMaxUnavailableNodes}
}

// checkMasterFirst refuses a worker upgrade above the master's version
// (the cluster's kube_tag) before the call.
func checkMasterFirst(ctx context.Context, cl *nks.Client, clusterUUID, group, version string) error {
	cluster, err := cl.GetCluster(ctx, clusterUUID)
	if err != nil {
		return err
	}
	err = nks.CheckUpgrade(nks.UpgradeCheck{NodeGroup: group, Target: version, MasterVersion: cluster.KubeTag()})
	if err != nil && !errors.Is(err, nks.ErrAlreadyAtVersion) {
		return fault.Errorf(fault.Invalid, "%w", err)
	}
	return nil
}

func init() {
	steps.Register(steps.Define(steps.Def[upgradeGroupParams]{
		Type:      "nks.nodegroup.upgrade",
		Preflight: preflightNodeGroupUpgrade,
		Summary: "Upgrade one node group (default-master for the master components, which go first). " +
			"The version is checked against /v1/supports and the master's version first. For the ordered " +
			"whole-cluster upgrade use nks.cluster.upgrade.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "nodegroup": "default-master", "version": "v1.31.4"},
		Outputs:  groupOutputs,
		Check:    (*upgradeGroupParams).checkRef,
		Plan: func(p *upgradeGroupParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: nks.Path("supports"), Note: "checks that " + p.Version + " is supported"},
				{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster), Note: "reads the master's version"},
				{Method: http.MethodPost, Path: groupPlanPath(p.groupRefParams, "upgrade"), Body: upgradeRequest(p)},
			}
		},
		Run: func(ctx context.Context, c *steps.Call, p *upgradeGroupParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupUpgrade,
				call: func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error) {
					if err := checkSupported(ctx, cl, p.Version); err != nil {
						return mutationResult{}, err
					}
					if err := checkMasterFirst(ctx, cl, clusterUUID, p.NodeGroup, p.Version); err != nil {
						return mutationResult{}, err
					}
					return groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
						return cl.UpgradeNodeGroup(ctx, p.Cluster, p.NodeGroup, upgradeRequest(p))
					})(ctx, cl, clusterUUID)
				}})
		},
	}))
	steps.Register(steps.Define(steps.Def[userScriptParams]{
		Type:     "nks.nodegroup.userscript",
		Summary:  "Change a node group's user script (default-master for the master components).",
		Mutating: true,
		Scripts:  []steps.Script{{Param: "contents", Instead: userScriptInstead}},
		Example:  map[string]any{"cluster": "prod", "nodegroup": "default-master", "contents": "#!/bin/sh\n"},
		Outputs:  groupOutputs,
		Check:    (*userScriptParams).checkRef,
		Plan: func(p *userScriptParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: groupPlanPath(p.groupRefParams, "userscript"),
				Body: nks.UserScriptRequest{Contents: p.Contents}}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *userScriptParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupUserScript,
				call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
					return cl.SetUserScript(ctx, p.Cluster, p.NodeGroup, nks.UserScriptRequest{Contents: p.Contents})
				})})
		},
	}))
	steps.Register(steps.Define(steps.Def[flavorParams]{
		Type:     "nks.nodegroup.flavor",
		Summary:  "Change a node group's instance flavor (a rolling update). With wait, the step ends when the NODEGROUP_UPDATE_FLAVOR task succeeds.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "nodegroup": "pool-b", "flavor_id": "2d6c9f5c-5b68-4e62-8d7a-3c0c4a7b8b02"},
		Outputs:  groupOutputs,
		Check:    (*flavorParams).checkRef,
		Plan: func(p *flavorParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPatch, Path: groupPlanPath(p.groupRefParams), Body: flavorRequest(p)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *flavorParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupUpdateFlavor,
				call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
					return cl.ChangeFlavor(ctx, p.Cluster, p.NodeGroup, flavorRequest(p))
				})})
		},
	}))
}
