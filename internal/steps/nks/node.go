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

func checkNodeAction(p *nodeActionParams, dyn map[string]bool) []fault.Problem {
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
		nodes                  []any
		send                   func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error)
	}{
		{"nks.nodegroup.stop_nodes", "Stop", "stop_node", nks.EventNodeGroupNodeStop,
			[]any{"3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b01", "3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b02"},
			func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error) {
				return cl.StopNodes
			}},
		{"nks.nodegroup.start_nodes", "Start", "start_node", nks.EventNodeGroupNodeStart,
			[]any{"3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b01"},
			func(cl *nks.Client) func(context.Context, string, string, nks.NodeActionRequest) (string, error) {
				return cl.StartNodes
			}},
	} {
		steps.Register(steps.Define(steps.Def[nodeActionParams]{
			Type: a.typ,
			Summary: a.verb + " worker nodes of a node group. With wait, the step ends when the " +
				a.event + " task succeeds.",
			Example:  map[string]any{"cluster": "prod", "nodegroup": "pool-b", "node_list": a.nodes},
			Mutating: true,
			Outputs:  groupOutputs,
			Check:    checkNodeAction,
			Plan: func(p *nodeActionParams) []steps.PlannedCall {
				return []steps.PlannedCall{{Method: http.MethodPost, Path: groupPlanPath(p.groupRefParams, a.path), Body: nodeActionRequest(p)}}
			},
			Run: func(ctx context.Context, c *steps.Call, p *nodeActionParams) (steps.Outputs, error) {
				return mutate(ctx, c, op{conn: p.Connection, cluster: p.Cluster, wait: &p.waitParams, event: a.event,
					call: groupCall(p.groupRefParams, func(ctx context.Context, cl *nks.Client) (string, error) {
						return a.send(cl)(ctx, p.Cluster, p.NodeGroup, nodeActionRequest(p))
					})})
			},
		}))
	}
}
