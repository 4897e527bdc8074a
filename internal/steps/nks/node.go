package nks

import (
	"context"
	"net/http"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/steps"
)

// nodeActionParams are the params of nks.nodegroup.stop_nodes and
// nks.nodegroup.start_nodes.
type nodeActionParams struct {
	groupRefParams
	NodeList []string `json:"node_list" required:"true" minlen:"1" desc:"node instance UUIDs (sent colon-separated)"`
	waitParams
}

func nodeActionRequest(p *nodeActionParams) nks.NodeActionRequest {
	return nks.NodeActionRequest{NodeList: nks.JoinNodes(p.NodeList...)}
}

func checkNodeAction(params any, dyn map[string]bool) []fault.Problem {
	p := params.(*nodeActionParams)
	var ps problems
	checkGroupRef(&ps, dyn, p.groupRefParams)
	if !dyn["node_list"] && len(p.NodeList) > 0 {
		ps.add("node_list", nks.CheckNodeList(nks.JoinNodes(p.NodeList...)))
	}
	return ps
}

func init() {
	for _, a := range []struct {
		typ, verb, path, event string
		send                   func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error)
	}{
		{"nks.nodegroup.stop_nodes", "Stop", "stop_node", nks.EventNodeGroupNodeStop,
			func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error) {
				return cl.StopNodes
			}},
		{"nks.nodegroup.start_nodes", "Start", "start_node", nks.EventNodeGroupNodeStart,
			func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error) {
				return cl.StartNodes
			}},
	} {
		steps.Register(steps.Descriptor{
			Type: a.typ,
			Summary: a.verb + " worker nodes of a node group. With wait, the step ends when the " +
				a.event + " task succeeds.",
			Params:   nodeActionParams{},
			Mutating: true,
			Outputs:  groupOutputs,
			Check:    checkNodeAction,
			Plan: func(params any) []steps.PlannedCall {
				p := params.(*nodeActionParams)
				return []steps.PlannedCall{{Method: http.MethodPost, Path: groupPlanPath(p.groupRefParams, a.path), Body: nodeActionRequest(p)}}
			},
			Run: steps.Typed(func(ctx context.Context, c *steps.Call, p *nodeActionParams) (steps.Outputs, error) {
				return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: a.event,
					call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
						return a.send(cl)(ctx, p.Cluster, p.NodeGroup, nodeActionRequest(p))
					})})
			}),
		})
	}
}
