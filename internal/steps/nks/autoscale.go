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

// caSettings are the optional autoscaler settings shared by the create
// labels and nks.nodegroup.autoscaler.set.
type caSettings struct {
	CAMaxNodeCount           *int  `json:"ca_max_node_count" min:"0" desc:"autoscaler: most nodes"`
	CAMinNodeCount           *int  `json:"ca_min_node_count" min:"0" desc:"autoscaler: fewest nodes"`
	CAScaleDownEnable        *bool `json:"ca_scale_down_enable" desc:"autoscaler: allow scaling down"`
	CAScaleDownUnneededTime  *int  `json:"ca_scale_down_unneeded_time" min:"0" desc:"autoscaler: minutes a node is unneeded before removal"`
	CAScaleDownUtilThresh    *int  `json:"ca_scale_down_util_thresh" min:"1" max:"100" desc:"autoscaler: utilisation in percent below which a node is unneeded"`
	CAScaleDownDelayAfterAdd *int  `json:"ca_scale_down_delay_after_add" min:"0" desc:"autoscaler: minutes after a scale-up before scaling down"`
}

func (s caSettings) check(ps *problems, prefix string) {
	if s.CAMaxNodeCount != nil && s.CAMinNodeCount != nil {
		ps.add(prefix+"ca_min_node_count", nks.CheckAutoscalerNodeCounts(*s.CAMinNodeCount, *s.CAMaxNodeCount))
	}
}

// setAutoscalerParams mirror the autoscaler change body, with booleans for
// the True/False flags and numbers for the counts and times.
type setAutoscalerParams struct {
	groupRefParams
	CAEnable bool `json:"ca_enable" required:"true" desc:"enable the autoscaler"`
	caSettings
	waitParams
}

func autoscalerRequest(p *setAutoscalerParams) nks.AutoscalerRequest {
	return nks.AutoscalerRequest{
		CAEnable: flag(p.CAEnable), CAMaxNodeCount: optInt(p.CAMaxNodeCount), CAMinNodeCount: optInt(p.CAMinNodeCount),
		CAScaleDownEnable: optFlag(p.CAScaleDownEnable), CAScaleDownUnneededTime: optInt(p.CAScaleDownUnneededTime),
		CAScaleDownUtilThresh: optInt(p.CAScaleDownUtilThresh), CAScaleDownDelayAfterAdd: optInt(p.CAScaleDownDelayAfterAdd),
	}
}

// number reads a setting the API gives as text: an integer, a float, or
// nil when absent or not a number.
func number(t nks.Text) any {
	s := strings.TrimSpace(string(t))
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return nil
}

func init() {
	steps.Register(steps.Define(steps.Def[groupRefParams]{
		Type:    "nks.nodegroup.autoscaler.get",
		Summary: "Read a node group's autoscaler settings.",
		Example: map[string]any{"cluster": "prod", "nodegroup": "pool-b"},
		Outputs: []steps.Output{
			{Name: "ca_enable", Type: "boolean", Description: "whether the autoscaler is on"},
			{Name: "ca_max_node_count", Type: "any", Description: "most nodes (integer, null when unset)"},
			{Name: "ca_min_node_count", Type: "any", Description: "fewest nodes (integer, null when unset)"},
			{Name: "ca_scale_down_enable", Type: "boolean", Description: "whether scaling down is allowed"},
			{Name: "ca_scale_down_unneeded_time", Type: "any", Description: "minutes (null when unset)"},
			{Name: "ca_scale_down_util_thresh", Type: "any", Description: "utilisation threshold (null when unset)"},
			{Name: "ca_scale_down_delay_after_add", Type: "any", Description: "minutes (null when unset)"},
		},
		Check: (*groupRefParams).checkRef,
		Plan: func(p *groupRefParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodGet, Path: groupPlanPath(*p, "autoscale")}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *groupRefParams) (steps.Outputs, error) {
			return read(ctx, c, p.Connection, func(cl *nks.Client) (steps.Outputs, error) {
				a, err := cl.GetAutoscaler(ctx, p.Cluster, p.NodeGroup)
				if err != nil {
					return nil, err
				}
				return steps.Outputs{
					"ca_enable": a.CAEnable.Bool(), "ca_max_node_count": number(a.CAMaxNodeCount),
					"ca_min_node_count": number(a.CAMinNodeCount), "ca_scale_down_enable": a.CAScaleDownEnable.Bool(),
					"ca_scale_down_unneeded_time":   number(a.CAScaleDownUnneededTime),
					"ca_scale_down_util_thresh":     number(a.CAScaleDownUtilThresh),
					"ca_scale_down_delay_after_add": number(a.CAScaleDownDelayAfterAdd),
				}, nil
			})
		},
	}))
	steps.Register(steps.Define(steps.Def[setAutoscalerParams]{
		Type:     "nks.nodegroup.autoscaler.set",
		Summary:  "Change a node group's autoscaler settings. With wait, the step ends when the NODEGROUP_SET_CLUSTER_AUTOSCALER task succeeds.",
		Mutating: true,
		Example:  map[string]any{"cluster": "prod", "nodegroup": "pool-b", "ca_enable": true, "ca_min_node_count": 1, "ca_max_node_count": 3, "ca_scale_down_util_thresh": 50},
		Outputs:  groupOutputs,
		Check: func(p *setAutoscalerParams, dyn map[string]bool) []fault.Problem {
			var ps problems
			checkGroupRef(&ps, dyn, p.groupRefParams)
			if !dyn["ca_min_node_count"] && !dyn["ca_max_node_count"] {
				p.caSettings.check(&ps, "")
			}
			return ps
		},
		Plan: func(p *setAutoscalerParams) []steps.PlannedCall {
			return []steps.PlannedCall{{Method: http.MethodPost, Path: groupPlanPath(p.groupRefParams, "autoscale"), Body: autoscalerRequest(p)}}
		},
		Run: func(ctx context.Context, c *steps.Call, p *setAutoscalerParams) (steps.Outputs, error) {
			return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: nks.EventNodeGroupSetAutoscaler,
				call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
					return cl.SetAutoscaler(ctx, p.Cluster, p.NodeGroup, autoscalerRequest(p))
				})})
		},
	}))
}
