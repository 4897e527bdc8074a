package nks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// lostAnswerHost is a host whose process "dies" when the step records the
// answer of its mutating call (phase called): the request reached the
// service, the step never learned it.
type lostAnswerHost struct {
	*stepstest.Host
	dead bool
}

func (h *lostAnswerHost) Checkpoint(ctx context.Context, b []byte) error {
	var cp mutationCheckpoint
	if h.dead || (json.Unmarshal(b, &cp) == nil && cp.Phase == phaseCalled) {
		h.dead = true
		return context.Canceled
	}
	return h.Host.Checkpoint(ctx, b)
}

func reconcileClusterWith(name string, wait bool) map[string]any {
	return map[string]any{
		"name": name, "keypair": "ops-key", "node_count": 2, "wait": wait,
		"flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01", "fixed_network": "a1b2c3d4-0000-4000-8000-000000000001",
		"fixed_subnet": "a1b2c3d4-0000-4000-8000-000000000002",
		"labels": map[string]any{
			"availability_zone": "kr-pub-a", "node_image": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
			"boot_volume_type": "General HDD", "boot_volume_size": 50, "kube_tag": "v1.30.3",
		},
	}
}

func reconcileGroupWith(cluster, name string, wait bool) map[string]any {
	return map[string]any{"cluster": cluster, "name": name, "wait": wait, "flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"image_id": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
		"labels":   map[string]any{"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD", "boot_volume_size": 50}}
}

// crashAfterCall runs a create step whose answer is lost and returns the
// call a restarted process would get.
func (r *flowRig) crashAfterCall(typ string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	r.t.Helper()
	d, c := r.call(typ, with)
	h := &lostAnswerHost{Host: stepstest.HostOf(c)}
	c.Host = h
	_, err := d.Run(context.Background(), c)
	require.Error(r.t, err, "the process died")
	c.Host = h.Host
	return r.resumed(typ, with, c)
}

func (r *flowRig) posts(path string) int {
	n := 0
	for _, call := range r.srv.Journal.Calls("nks", "POST", path) {
		if call.Path == path {
			n++
		}
	}
	return n
}

func TestReconcileClusterCreate(t *testing.T) {
	intent := steps.Intent{RunID: "run-test", Step: "step", Attempt: 1}

	t.Run("a create whose answer was lost adopts the cluster of the same name and waits on its task", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		d, again := r.crashAfterCall("nks.cluster.create", reconcileClusterWith("prod", true))
		require.NotNil(t, d.Reconcile, "nks.cluster.create has a Reconcile")
		out, found, err := d.Reconcile(context.Background(), again, intent)
		require.NoError(t, err)
		require.True(t, found)
		list, err := r.cl.ListClusters(context.Background())
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, list[0].UUID, out["uuid"])
		assert.Equal(t, "prod", out["name"])
		assert.Equal(t, nks.TaskSuccess, out["task_status"])
		task, err := r.cl.LatestEvent(context.Background(), list[0].UUID, list[0].UUID, nks.EventClusterCreate, time.Time{})
		require.NoError(t, err)
		assert.Equal(t, task.UUID, out["task_uuid"])
		assert.Equal(t, 1, r.posts("/v1/clusters"), "one create request")
	})

	t.Run("without wait the adopted cluster is the output at once", func(t *testing.T) {
		r := startFlowRig(t, 1)
		d, again := r.crashAfterCall("nks.cluster.create", reconcileClusterWith("prod", false))
		out, found, err := d.Reconcile(context.Background(), again, intent)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "prod", out["name"])
		assert.NotEmpty(t, out["uuid"])
		assert.Equal(t, "", out["task_status"])
	})

	t.Run("a create that never reached the service is not adopted", func(t *testing.T) {
		r := startFlowRig(t, 1)
		r.srv.Faults.Add(sim.Fault{Service: "nks", Method: "POST", PathPrefix: "/v1/clusters", Status: 503, Count: 1})
		d, c := r.call("nks.cluster.create", reconcileClusterWith("prod", true))
		_, err := d.Run(context.Background(), c)
		require.Equal(t, fault.Unavailable, fault.CodeOf(err), "an ambiguous answer: %v", err)
		_, again := r.resumed("nks.cluster.create", reconcileClusterWith("prod", true), c)
		_, found, err := d.Reconcile(context.Background(), again, intent)
		require.NoError(t, err)
		assert.False(t, found, "no cluster of that name: the step runs again")
	})

	t.Run("a step that never sent its request or recorded the answer is left to run", func(t *testing.T) {
		r := startFlowRig(t, 1)
		d, c := r.call("nks.cluster.create", reconcileClusterWith("prod", false))
		_, found, err := d.Reconcile(context.Background(), c, intent)
		require.NoError(t, err)
		assert.False(t, found, "no checkpoint: nothing was sent")
		c.Resume = []byte(`{"phase":"called","result":{"cluster_uuid":"x","resource_uuid":"x","outputs":{"uuid":"x","name":"prod"}}}`)
		_, found, err = d.Reconcile(context.Background(), c, intent)
		require.NoError(t, err)
		assert.False(t, found, "the answer was recorded: the step resumes from it")
		assert.Empty(t, r.srv.Journal.Calls("nks", "", ""), "no API call was needed to decide")
	})
}

func TestReconcileNodeGroupCreate(t *testing.T) {
	intent := steps.Intent{RunID: "run-test", Step: "step", Attempt: 1}
	r := startFlowRig(t, upgradeSpeed)
	id := r.createCluster("prod", "v1.30.3")
	r.addGroup(id, "pool-a")
	r.srv.Journal.Reset()

	d, again := r.crashAfterCall("nks.nodegroup.create", reconcileGroupWith("prod", "pool-b", true))
	require.NotNil(t, d.Reconcile, "nks.nodegroup.create has a Reconcile")
	out, found, err := d.Reconcile(context.Background(), again, intent)
	require.NoError(t, err)
	require.True(t, found)
	g, err := r.cl.GetNodeGroup(context.Background(), id, "pool-b")
	require.NoError(t, err)
	assert.Equal(t, g.UUID, out["uuid"])
	assert.Equal(t, "pool-b", out["name"])
	assert.Equal(t, id, out["cluster_uuid"])
	assert.Equal(t, nks.TaskSuccess, out["task_status"])
	assert.Equal(t, "CREATE_COMPLETE", g.Status)
	assert.Equal(t, 1, r.posts("/v1/clusters/prod/nodegroups"), "one create request")
	assert.NotEmpty(t, out["task_uuid"])
}
