package nks

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

func strList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func labelMap(l nks.Labels) map[string]any {
	out := make(map[string]any, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

// clusterView is a cluster as steps output it.
func clusterView(c *nks.Cluster) map[string]any {
	return map[string]any{
		"uuid": c.UUID, "name": c.Name, "status": c.Status, "status_reason": c.StatusReason,
		"node_count": c.NodeCount, "kube_tag": c.KubeTag(), "flavor_id": c.FlavorID, "keypair": c.Keypair,
		"stack_id": c.StackID, "api_address": c.APIAddress, "project_id": c.ProjectID,
		"fixed_network": c.FixedNetwork, "fixed_subnet": c.FixedSubnet, "node_addresses": strList(c.NodeAddresses),
		"created_at": c.CreatedAt, "updated_at": c.UpdatedAt, "health_status": c.HealthStatus,
		"labels": labelMap(c.Labels),
	}
}

// ---- nks.cluster.list, nks.cluster.get -------------------------------------

type clusterGetParams struct {
	connParam
	clusterParam
}

func init() {
	steps.Register(steps.Define(steps.Def[connParam]{
		Type:    "nks.cluster.list",
		Summary: "List the clusters (the list fields: uuid, name, flavor_id, keypair, node_count, stack_id, status, labels).",
		Example: map[string]any{},
		Outputs: []steps.Output{
			{Name: "clusters", Type: "list", Description: "clusters as maps: uuid, name, status, node_count, kube_tag, flavor_id, keypair, stack_id, labels"},
			{Name: "count", Type: "integer", Description: "number of clusters"},
		},
		Plan: func(*connParam) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: nks.Path("clusters")}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *connParam) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				list, err := cl.ListClusters(ctx)
				if err != nil {
					return nil, err
				}
				out := make([]any, len(list))
				for i := range list {
					out[i] = clusterView(&list[i])
				}
				return steps.Outputs{"clusters": out, "count": len(list)}, nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[clusterGetParams]{
		Type:    "nks.cluster.get",
		Summary: "Read one cluster by name or UUID.",
		Example: map[string]any{"cluster": "prod"},
		Outputs: []steps.Output{
			{Name: "cluster", Type: "map", Description: "the cluster: uuid, name, status, status_reason, node_count, kube_tag, api_address, node_addresses, labels, ..."},
			{Name: "uuid", Type: "string", Description: "cluster UUID"},
			{Name: "name", Type: "string", Description: "cluster name"},
			{Name: "status", Type: "string", Description: "cluster status (CREATE_COMPLETE, UPDATE_IN_PROGRESS, ...)"},
			{Name: "node_count", Type: "integer", Description: "worker nodes"},
			{Name: "kube_tag", Type: "string", Description: "the master's version"},
		},
		Check: (*clusterGetParams).checkRef,
		Plan: func(p *clusterGetParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *clusterGetParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				got, err := cl.GetCluster(ctx, p.Cluster)
				if err != nil {
					return nil, err
				}
				return steps.Outputs{"cluster": clusterView(got), "uuid": got.UUID, "name": got.Name,
					"status": got.Status, "node_count": got.NodeCount, "kube_tag": got.KubeTag()}, nil
			})
		},
	}))
}

// ---- nks.cluster.create ----------------------------------------------------

type createClusterLabels struct {
	AvailabilityZone     string   `json:"availability_zone" required:"true" desc:"availability zone of the default worker group"`
	NodeImage            string   `json:"node_image" required:"true" desc:"base image UUID of the default worker group"`
	BootVolumeType       string   `json:"boot_volume_type" required:"true" desc:"block storage type"`
	BootVolumeSize       int      `json:"boot_volume_size" required:"true" min:"1" desc:"block storage size in GB"`
	BootVolumeKeyID      string   `json:"boot_volume_key_id" desc:"symmetric key ID for encrypted block storage"`
	BootVolumeAppkey     string   `json:"boot_volume_appkey" desc:"appkey of that symmetric key"`
	ExternalNetworkID    string   `json:"external_network_id" desc:"VPC network attached to the internet gateway"`
	ExternalSubnetIDList []string `json:"external_subnet_id_list" desc:"subnets attached to the internet gateway (sent colon-separated)"`
	CAEnable             bool     `json:"ca_enable" default:"false" desc:"enable the autoscaler on the default worker group"`
	caSettings
	KubeTag                   string   `json:"kube_tag" required:"true" pattern:"^v(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)$" like:"v1.28.3" desc:"orchestrator version, like v1.29.3 (must be supported by /v1/supports)"`
	UserScript                string   `json:"user_script" desc:"user script (old)"`
	UserScriptV2              string   `json:"user_script_v2" desc:"user script"`
	MasterLBFloatingIPEnabled bool     `json:"master_lb_floating_ip_enabled" default:"false" desc:"give the API endpoint a public address"`
	StrictSGRules             *bool    `json:"strict_sg_rules" desc:"only required security rules in worker security groups"`
	AdditionalNetworkIDList   []string `json:"additional_network_id_list" desc:"additional VPC networks (sent colon-separated)"`
	AdditionalSubnetIDList    []string `json:"additional_subnet_id_list" desc:"additional VPC subnets (sent colon-separated)"`
	ServiceClusterIPRange     string   `json:"service_cluster_ip_range" desc:"service network CIDR"`
	PodsNetworkCIDR           string   `json:"pods_network_cidr" desc:"pod network CIDR"`
	PodsNetworkSubnet         int      `json:"pods_network_subnet" min:"20" max:"28" desc:"pod subnet size, at least the pod network's prefix + 2"`
	CNIDriver                 string   `json:"cni_driver" desc:"network driver (calico, calico-ebpf)"`
	NCRSgw                    string   `json:"ncr_sgw" desc:"service gateway UUID of the registry type"`
	OBSSgw                    string   `json:"obs_sgw" desc:"service gateway UUID of the object storage type"`
}

type createClusterParams struct {
	connParam
	Name          string              `json:"name" required:"true" maxlen:"255" desc:"cluster name"`
	Keypair       string              `json:"keypair" required:"true" desc:"key pair of the default worker group"`
	NodeCount     int                 `json:"node_count" required:"true" min:"1" desc:"nodes of the default worker group"`
	FlavorID      string              `json:"flavor_id" required:"true" desc:"flavor UUID of the default workers"`
	FixedNetwork  string              `json:"fixed_network" required:"true" desc:"VPC network UUID"`
	FixedSubnet   string              `json:"fixed_subnet" required:"true" desc:"VPC subnet UUID"`
	CreateTimeout int                 `json:"create_timeout" min:"0" desc:"create timeout in minutes (0: the service's)"`
	Labels        createClusterLabels `json:"labels" required:"true" desc:"cluster labels"`
	ExtraLabels   map[string]string   `json:"extra_labels" desc:"labels the spec does not list (clusterautoscale, ...); a listed label wins"`
	waitParams
}

// checkCreateCluster applies the spec's rules between labels. A label
// given by an expression, or whose value failed its own tag, is left zero
// by the decoder, and zero labels are not checked: one bad label does not
// hide the problems of the others. At run time the required tags have
// already refused empty required labels.
func checkCreateCluster(p *createClusterParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	ps.name(dyn, "name", "cluster", p.Name)
	l := p.Labels
	var errs []error
	if l.PodsNetworkSubnet != 0 && l.PodsNetworkCIDR != "" {
		errs = nks.CheckPodSubnet(l.PodsNetworkCIDR, l.PodsNetworkSubnet)
	}
	errs = append(errs, nks.CheckClusterNetworks(nks.ClusterNetworks{
		PodsNetwork: l.PodsNetworkCIDR, ServiceNetwork: l.ServiceClusterIPRange, KubeTag: l.KubeTag,
	})...)
	seen := map[string]bool{}
	for _, err := range errs {
		if err == nil || seen[err.Error()] {
			continue
		}
		seen[err.Error()] = true
		ps.add(networkLabel(err.Error()), err)
	}
	l.caSettings.check(&ps, "labels.")
	return ps
}

// networkLabel names the label a network rule's message is about: the
// rules' sentences start with their subject.
func networkLabel(msg string) string {
	switch {
	case strings.HasPrefix(msg, "pod subnet"):
		return "labels.pods_network_subnet"
	case strings.HasPrefix(msg, "service network"):
		return "labels.service_cluster_ip_range"
	}
	return "labels.pods_network_cidr"
}

func createClusterRequest(p *createClusterParams) nks.CreateClusterRequest {
	l := p.Labels
	return nks.CreateClusterRequest{
		Name: p.Name, Keypair: p.Keypair, ClusterTemplateID: nks.ClusterTemplateID, NodeCount: p.NodeCount,
		FlavorID: p.FlavorID, FixedNetwork: p.FixedNetwork, FixedSubnet: p.FixedSubnet, CreateTimeout: p.CreateTimeout,
		Labels: nks.ClusterLabels{
			AvailabilityZone: l.AvailabilityZone, NodeImage: l.NodeImage, BootVolumeType: l.BootVolumeType,
			BootVolumeSize: strconv.Itoa(l.BootVolumeSize), BootVolumeKeyID: l.BootVolumeKeyID, BootVolumeAppkey: l.BootVolumeAppkey,
			ExternalNetworkID: l.ExternalNetworkID, ExternalSubnetIDList: strings.Join(l.ExternalSubnetIDList, ":"),
			CertManagerAPI: "True", CAEnable: flag(l.CAEnable),
			CAMaxNodeCount: optInt(l.CAMaxNodeCount), CAMinNodeCount: optInt(l.CAMinNodeCount),
			CAScaleDownEnable: optFlag(l.CAScaleDownEnable), CAScaleDownUnneededTime: optInt(l.CAScaleDownUnneededTime),
			CAScaleDownUtilThresh: optInt(l.CAScaleDownUtilThresh), CAScaleDownDelayAfterAdd: optInt(l.CAScaleDownDelayAfterAdd),
			KubeTag: l.KubeTag, UserScript: l.UserScript, UserScriptV2: l.UserScriptV2,
			MasterLBFloatingIPEnabled: flag(l.MasterLBFloatingIPEnabled), StrictSGRules: optFlag(l.StrictSGRules),
			AdditionalNetworkIDList: strings.Join(l.AdditionalNetworkIDList, ":"), AdditionalSubnetIDList: strings.Join(l.AdditionalSubnetIDList, ":"),
			ServiceClusterIPRange: l.ServiceClusterIPRange, PodsNetworkCIDR: l.PodsNetworkCIDR, PodsNetworkSubnet: l.PodsNetworkSubnet,
			NCRSgw: l.NCRSgw, OBSSgw: l.OBSSgw, Extra: extraLabels(p.ExtraLabels, l.CNIDriver),
		},
	}
}

func extraLabels(extra map[string]string, cni string) map[string]string {
	out := map[string]string{}
	for k, v := range extra {
		out[k] = v
	}
	if cni != "" {
		out["cni_driver"] = cni
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// checkSupported refuses a version that /v1/supports does not mark true.
func checkSupported(ctx context.Context, cl *nks.Client, version string) error {
	sup, err := cl.Supports(ctx)
	if err != nil {
		return err
	}
	if err := nks.CheckSupportedVersion(version, sup.SupportedK8s); err != nil {
		return fault.Errorf(fault.Invalid, "%w", err)
	}
	return nil
}

func init() {
	steps.Register(steps.Define(steps.Def[createClusterParams]{
		Type:      "nks.cluster.create",
		Preflight: preflightClusterCreate,
		Summary: "Create a cluster (POST /v1/clusters). The version is checked against /v1/supports first; " +
			"with wait, the step ends when the CLUSTER_CREATE task succeeds.",
		Mutating: true,
		Scripts:  userScripts,
		Example: map[string]any{
			"name": "prod", "keypair": "ops-key", "node_count": 2,
			"flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01", "fixed_network": "a1b2c3d4-0000-4000-8000-000000000001",
			"fixed_subnet": "a1b2c3d4-0000-4000-8000-000000000002",
			"labels": map[string]any{
				"availability_zone": "kr-pub-a", "node_image": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
				"boot_volume_type": "General HDD", "boot_volume_size": 50, "kube_tag": "v1.31.4",
				"master_lb_floating_ip_enabled": true, "pods_network_cidr": "10.100.0.0/16", "pods_network_subnet": 24,
				"cni_driver": "calico",
			},
			"extra_labels": map[string]any{"clusterautoscale": "nodegroupfeature"},
			"wait":         true,
		},
		Outputs: withWaitOutputs(
			steps.Output{Name: "uuid", Type: "string", Description: "the new cluster's UUID"},
			steps.Output{Name: "name", Type: "string", Description: "the cluster name"},
		),
		Check: checkCreateCluster,
		Plan: func(p *createClusterParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: nks.Path("supports"), Note: "checks that " + p.Labels.KubeTag + " is supported"},
				{Method: http.MethodPost, Path: nks.Path("clusters"), Body: createClusterRequest(p)},
			}
		},
		Reconcile: reconcileClusterCreate,
		Run: func(ctx context.Context, c *steps.Call, p *createClusterParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, wait: &p.waitParams, event: nks.EventClusterCreate,
				call: func(ctx context.Context, cl *nks.Client, _ string) (mutationResult, error) {
					if err := checkSupported(ctx, cl, p.Labels.KubeTag); err != nil {
						return mutationResult{}, err
					}
					id, err := cl.CreateCluster(ctx, createClusterRequest(p))
					if err != nil {
						return mutationResult{}, err
					}
					return mutationResult{ClusterUUID: id, ResourceUUID: id, Outputs: steps.Outputs{"uuid": id, "name": p.Name}}, nil
				}})
		},
	}))
}

// ---- nks.cluster.delete, nks.cluster.resize ----------------------------------

type deleteClusterParams struct {
	connParam
	clusterParam
	waitParams
}

type resizeParams struct {
	connParam
	clusterParam
	NodeGroup     string   `json:"nodegroup" required:"true" maxlen:"255" desc:"worker node group name or UUID"`
	NodeCount     int      `json:"node_count" required:"true" min:"1" max:"10" desc:"new number of nodes (the maximum is the node quota's)"`
	NodesToRemove []string `json:"nodes_to_remove" desc:"node UUIDs to delete when scaling down (default: chosen at random)"`
	waitParams
}

func resizeRequest(p *resizeParams) nks.ResizeRequest {
	return nks.ResizeRequest{NodeGroup: p.NodeGroup, NodeCount: p.NodeCount, NodesToRemove: p.NodesToRemove}
}

func init() {
	steps.Register(steps.Define(steps.Def[deleteClusterParams]{
		Type:     "nks.cluster.delete",
		Summary:  "Delete a cluster. With wait, the step ends when the cluster is gone.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "wait": true, "wait_timeout": "30m"},
		Outputs: withWaitOutputs(
			steps.Output{Name: "uuid", Type: "string", Description: "the deleted cluster's UUID"},
			steps.Output{Name: "name", Type: "string", Description: "its name"},
		),
		Check: (*deleteClusterParams).checkRef,
		Plan: func(p *deleteClusterParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster), Note: "reads the UUID and name"},
				{Method: http.MethodDelete, Path: nks.Path("clusters", p.Cluster)},
			}
		},
		Run: func(ctx context.Context, c *steps.Call, p *deleteClusterParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventClusterDelete,
				call: func(ctx context.Context, cl *nks.Client, _ string) (mutationResult, error) {
					got, err := cl.GetCluster(ctx, p.Cluster)
					if err != nil {
						return mutationResult{}, err
					}
					if err := cl.DeleteCluster(ctx, got.UUID); err != nil {
						return mutationResult{}, err
					}
					return mutationResult{ClusterUUID: got.UUID, ResourceUUID: got.UUID,
						Outputs: steps.Outputs{"uuid": got.UUID, "name": got.Name}}, nil
				}})
		},
	}))
	steps.Register(steps.Define(steps.Def[resizeParams]{
		Type:     "nks.cluster.resize",
		Summary:  "Change a worker node group's node count (1..10). With wait, the step ends when the CLUSTER_RESIZE task succeeds.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "nodegroup": "default-worker", "node_count": 2, "nodes_to_remove": []any{"3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b01"}},
		Outputs: withWaitOutputs(
			steps.Output{Name: "uuid", Type: "string", Description: "the cluster's UUID"},
			steps.Output{Name: "nodegroup_uuid", Type: "string", Description: "the resized node group's UUID"},
			steps.Output{Name: "node_count", Type: "integer", Description: "the requested node count"},
		),
		Check: func(p *resizeParams, dyn map[string]bool) []fault.Problem {
			var ps problems
			ps.name(dyn, "cluster", "cluster", p.Cluster)
			ps.name(dyn, "nodegroup", "node group", p.NodeGroup)
			return ps
		},
		Plan: func(p *resizeParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "nodegroups", p.NodeGroup), Note: "reads the node group's UUID"},
				{Method: http.MethodPost, Path: nks.Path("clusters", p.Cluster, "actions", "resize"), Body: resizeRequest(p)},
			}
		},
		Run: func(ctx context.Context, c *steps.Call, p *resizeParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventClusterResize,
				call: func(ctx context.Context, cl *nks.Client, _ string) (mutationResult, error) {
					g, err := cl.GetNodeGroup(ctx, p.Cluster, p.NodeGroup)
					if err != nil {
						return mutationResult{}, err
					}
					id, err := cl.ResizeCluster(ctx, p.Cluster, resizeRequest(p))
					if err != nil {
						return mutationResult{}, err
					}
					// The call answers the cluster; the task is recorded on the group.
					return mutationResult{ClusterUUID: id, ResourceUUID: g.UUID,
						Outputs: steps.Outputs{"uuid": id, "nodegroup_uuid": g.UUID, "node_count": p.NodeCount}}, nil
				}})
		},
	}))
}
