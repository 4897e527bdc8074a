package nks

import (
	"context"
	"fmt"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// Reconcile for the creates. The engine calls these on resume (or on the
// attempt after an ambiguous error) when a create's intent was persisted
// but its result was not. The mutation checkpoint says how far the step
// got:
//
//   - none: the create request was never sent (a mutation checkpoints
//     "calling" before it sends): run the step.
//   - called: the answer was recorded: run the step, which skips the call
//     and goes on waiting on the recorded task.
//   - calling: the request may have reached the service. A resource of
//     the same name is adopted (outputs as the create would have given
//     them; with wait, its task is awaited); none means the request never
//     arrived: run the step.

// reconcileClusterCreate adopts the cluster of the name being created.
func reconcileClusterCreate(ctx context.Context, c *steps.Call, p *createClusterParams, _ steps.Intent) (steps.Outputs, bool, error) {
	m, err := startMutation(c, p.Connection)
	if err != nil || !m.inDoubt() {
		return nil, false, err
	}
	list, err := m.cl.ListClusters(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("list clusters to find %s: %w", p.Name, err)
	}
	for _, cluster := range list {
		if cluster.Name != p.Name {
			continue
		}
		c.Log.Info("adopting the cluster created before the interruption", "cluster", cluster.Name, "uuid", cluster.UUID)
		out, err := m.adopt(ctx, p.waitParams, nks.EventClusterCreate, mutationResult{
			ClusterUUID: cluster.UUID, ResourceUUID: cluster.UUID,
			Outputs: steps.Outputs{"uuid": cluster.UUID, "name": cluster.Name}})
		return out, err == nil, err
	}
	return nil, false, nil
}

// reconcileNodeGroupCreate adopts the node group of the name being
// created in the step's cluster.
func reconcileNodeGroupCreate(ctx context.Context, c *steps.Call, p *createGroupParams, _ steps.Intent) (steps.Outputs, bool, error) {
	m, err := startMutation(c, p.Connection)
	if err != nil || !m.inDoubt() {
		return nil, false, err
	}
	id, err := clusterUUID(ctx, m.cl, p.Cluster)
	if err != nil {
		return nil, false, fmt.Errorf("read cluster %s: %w", p.Cluster, err)
	}
	groups, err := m.cl.ListNodeGroups(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("list node groups of %s to find %s: %w", p.Cluster, p.Name, err)
	}
	for _, g := range groups {
		if g.Name != p.Name {
			continue
		}
		c.Log.Info("adopting the node group created before the interruption", "group", g.Name, "uuid", g.UUID)
		out, err := m.adopt(ctx, p.waitParams, nks.EventNodeGroupCreate, mutationResult{
			ClusterUUID: id, ResourceUUID: g.UUID,
			Outputs: steps.Outputs{"uuid": g.UUID, "name": g.Name, "cluster_uuid": id}})
		return out, err == nil, err
	}
	return nil, false, nil
}

// adopt records res as the create's answer (no request is sent) and, with
// wait, waits for the resource's create task as the step would have. The
// resource was just created, so its only task of the type is the one
// awaited: no task history is noted before.
func (m *mutation) adopt(ctx context.Context, w waitParams, event string, res mutationResult) (steps.Outputs, error) {
	return m.run(ctx, op{event: event, wait: &w,
		call: func(context.Context, *nks.Client, string) (mutationResult, error) { return res, nil }})
}
