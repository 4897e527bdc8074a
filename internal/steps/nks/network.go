package nks

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// ---- nks.cluster.cni_update ------------------------------------------------

type cniParams struct {
	connParam
	clusterParam
	CNI       string `json:"cni" default:"calico" enum:"calico" desc:"target network driver; calico is the only one (from flannel)"`
	PodCIDR   string `json:"pod_cidr" required:"true" desc:"pod network CIDR, at least a /24, clear of 169.254.0.0/16, 198.18.0.0/19 and the cluster's networks"`
	PodSubnet int    `json:"pod_subnet" default:"24" min:"20" max:"28" desc:"pod subnet size, at least the pod network's prefix + 2"`
	rolling
	waitParams
}

func cniRequest(p *cniParams) nks.CNIUpdateRequest {
	return nks.CNIUpdateRequest{CNI: p.CNI, PodCIDR: p.PodCIDR, PodSubnet: strconv.Itoa(p.PodSubnet),
		NumBufferNodes: p.NumBufferNodes, NumMaxUnavailableNodes: p.NumMaxUnavailableNodes}
}

// podRuleField names the param a pod network rule's message is about.
func podRuleField(msg string) string {
	if strings.HasPrefix(msg, "pod subnet") {
		return "pod_subnet"
	}
	return "pod_cidr"
}

func checkCNI(p *cniParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	ps.name(dyn, "cluster", "cluster", p.Cluster)
	var errs []error
	switch {
	case !dyn["pod_cidr"] && !dyn["pod_subnet"] && p.PodCIDR != "":
		errs = nks.CheckCNIPodCIDR(p.PodCIDR, p.PodSubnet, nks.CNINetworks{})
	case !dyn["pod_cidr"] && p.PodCIDR != "":
		errs = nks.CheckClusterNetworks(nks.ClusterNetworks{PodsNetwork: p.PodCIDR})
	}
	for _, err := range errs {
		if err != nil {
			ps.add(podRuleField(err.Error()), err)
		}
	}
	return ps
}

// checkCNIAgainstCluster applies the rules that need the cluster: its
// service network and its node count.
func checkCNIAgainstCluster(ctx context.Context, cl *nks.Client, clusterUUID string, p *cniParams) error {
	cluster, err := cl.GetCluster(ctx, clusterUUID)
	if err != nil {
		return err
	}
	errs := nks.CheckCNIPodCIDR(p.PodCIDR, p.PodSubnet, nks.CNINetworks{ServiceNetwork: cluster.Labels["service_cluster_ip_range"]})
	if p.NumMaxUnavailableNodes != nil {
		errs = append(errs, nks.CheckMaxUnavailableNodes(*p.NumMaxUnavailableNodes, cluster.NodeCount))
	}
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return fault.Errorf(fault.Invalid, "CNI change on cluster %s refused before the call: %s", cluster.Name, strings.Join(msgs, "; "))
	}
	return nil
}

// ---- nks.cluster.ipacl.get, nks.cluster.ipacl.set ----------------------------

type ipaclTarget struct {
	CIDRAddress string `json:"cidr_address" required:"true" desc:"IP address or CIDR range"`
	Description string `json:"description" maxlen:"255" desc:"what the target is"`
}

type setIPACLParams struct {
	connParam
	clusterParam
	Enable       bool          `json:"enable" default:"false" desc:"enforce the access control; when false the other settings are ignored"`
	Action       string        `json:"action" enum:"ALLOW,DENY" desc:"allow or deny the targets (required when enable is true)"`
	IPACLTargets []ipaclTarget `json:"ipacl_targets" desc:"targets (required when enable is true)"`
}

func ipaclRequest(p *setIPACLParams) nks.SetIPACLRequest {
	req := nks.SetIPACLRequest{Enable: strconv.FormatBool(p.Enable), Action: p.Action}
	for _, t := range p.IPACLTargets {
		req.Targets = append(req.Targets, nks.IPACLTarget{CIDRAddress: t.CIDRAddress, Description: t.Description})
	}
	return req
}

func checkSetIPACL(p *setIPACLParams, dyn map[string]bool) []fault.Problem {
	var ps problems
	ps.name(dyn, "cluster", "cluster", p.Cluster)
	if !dyn["ipacl_targets"] {
		for i, t := range p.IPACLTargets {
			if t.CIDRAddress != "" {
				ps.add(fmt.Sprintf("ipacl_targets[%d]", i), nks.CheckIPACLTarget(t.CIDRAddress, t.Description))
			}
		}
	}
	if p.Enable && !dyn["enable"] {
		if p.Action == "" && !dyn["action"] {
			ps = append(ps, fault.Problem{Path: "action", Message: "is required when enable is true (ALLOW or DENY)"})
		}
		if len(p.IPACLTargets) == 0 && !dyn["ipacl_targets"] {
			ps = append(ps, fault.Problem{Path: "ipacl_targets", Message: "is required when enable is true (at least one target)"})
		}
	}
	return ps
}

func init() {
	steps.Register(steps.Define(steps.Def[cniParams]{
		Type: "nks.cluster.cni_update",
		Summary: "Change the cluster network driver to calico with a new pod network. The pod network is checked " +
			"against the cluster's service network and node count before the call. With wait, the step ends when " +
			"the CLUSTER_CNI_UPDATE task succeeds.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "pod_cidr": "10.200.0.0/22", "pod_subnet": 24, "num_buffer_nodes": 0, "num_max_unavailable_nodes": 2},
		Outputs:  withWaitOutputs(steps.Output{Name: "uuid", Type: "string", Description: "the cluster's UUID"}),
		Check:    checkCNI,
		Plan: func(p *cniParams) []steps.PlannedCall {
			return []steps.PlannedCall{
				{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster), Note: "reads the service network and node count"},
				{Method: http.MethodPost, Path: nks.Path("clusters", p.Cluster, "actions", "cni_update"), Body: cniRequest(p)},
			}
		},
		Run: func(ctx context.Context, c *steps.Call, p *cniParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventClusterCNIUpdate,
				call: func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error) {
					if err := checkCNIAgainstCluster(ctx, cl, clusterUUID, p); err != nil {
						return mutationResult{}, err
					}
					id, err := cl.UpdateCNI(ctx, p.Cluster, cniRequest(p))
					if err != nil {
						return mutationResult{}, err
					}
					return mutationResult{ClusterUUID: id, ResourceUUID: id, Outputs: steps.Outputs{"uuid": id}}, nil
				}})
		},
	}))
	steps.Register(steps.Define(steps.Def[clusterGetParams]{
		Type:    "nks.cluster.ipacl.get",
		Summary: "Read the IP access control of the cluster's API endpoint.",
		Example: map[string]any{"cluster": "prod", "connection": "nks-kr2"},
		Outputs: []steps.Output{
			{Name: "cluster_uuid", Type: "string", Description: "the cluster's UUID"},
			{Name: "enable", Type: "boolean", Description: "whether access control is enforced"},
			{Name: "action", Type: "string", Description: `ALLOW or DENY ("" when disabled)`},
			{Name: "ipacl_targets", Type: "list", Description: "targets as maps {cidr_address, description} (empty when disabled)"},
		},
		Check: (*clusterGetParams).checkRef,
		Plan: func(p *clusterGetParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: nks.Path("clusters", p.Cluster, "api_ep_ipacl")}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *clusterGetParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				acl, err := cl.GetIPACL(ctx, p.Cluster)
				if err != nil {
					return nil, err
				}
				targets := make([]any, len(acl.Targets))
				for i, t := range acl.Targets {
					targets[i] = map[string]any{"cidr_address": t.CIDRAddress, "description": t.Description}
				}
				return steps.Outputs{"cluster_uuid": acl.ClusterUUID, "enable": acl.Enable.Bool(), "action": acl.Action, "ipacl_targets": targets}, nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[setIPACLParams]{
		Type:     "nks.cluster.ipacl.set",
		Summary:  "Set the IP access control of the cluster's API endpoint.",
		Mutating: true,
		Example: map[string]any{"cluster": "prod", "enable": true, "action": "DENY",
			"ipacl_targets": []any{map[string]any{"cidr_address": "198.51.100.7", "description": "old office"}}},
		Outputs: []steps.Output{{Name: "uuid", Type: "string", Description: "the cluster's UUID"}},
		Check:   checkSetIPACL,
		Plan: func(p *setIPACLParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: nks.Path("clusters", p.Cluster, "api_ep_ipacl"), Body: ipaclRequest(p)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *setIPACLParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster,
				call: func(ctx context.Context, cl *nks.Client, clusterUUID string) (mutationResult, error) {
					id, err := cl.SetIPACL(ctx, p.Cluster, ipaclRequest(p))
					if err != nil {
						return mutationResult{}, err
					}
					return mutationResult{ClusterUUID: id, ResourceUUID: id, Outputs: steps.Outputs{"uuid": id}}, nil
				}})
		},
	}))
}
