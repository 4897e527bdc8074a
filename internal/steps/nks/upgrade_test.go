package nks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	simnks "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// upgradeSpeed runs the simulated clock so that a 5-minute upgrade takes
// 0.1 s of real time.
const upgradeSpeed = 3000

// upgradeCalls returns the upgrade POSTs the simulator received, in order,
// as the node group each one named.
func (r *flowRig) upgradeCalls() ([]string, []sim.Call) {
	var names []string
	var calls []sim.Call
	for _, call := range r.srv.Journal.Calls("nks", "POST", "/v1/clusters/") {
		if rest, ok := strings.CutSuffix(call.Path, "/upgrade"); ok {
			names = append(names, rest[strings.LastIndex(rest, "/")+1:])
			calls = append(calls, call)
		}
	}
	return names, calls
}

// upgradeTasks maps node group name -> its newest NODEGROUP_UPGRADE task.
func (r *flowRig) upgradeTasks(cluster string) map[string]nks.Task {
	tasks, err := r.cl.ListTasks(context.Background(), cluster)
	require.NoError(r.t, err)
	out := map[string]nks.Task{}
	for _, t := range tasks {
		if t.Type == nks.EventNodeGroupUpgrade {
			out[t.ResourceName] = t
		}
	}
	return out
}

// upgradeCluster builds a cluster at v1.29.3 with default-worker, pool-b
// and pool-a.
func (r *flowRig) upgradeCluster() string {
	id := r.createCluster("prod", "v1.29.3")
	r.addGroup(id, "pool-b")
	r.addGroup(id, "pool-a")
	return id
}

func lastUpgrade(t *testing.T, b []byte) upgradeCheckpoint {
	t.Helper()
	var cp upgradeCheckpoint
	require.NoError(t, json.Unmarshal(b, &cp))
	return cp
}

func TestClusterUpgradeOrder(t *testing.T) {
	r := startFlowRig(t, upgradeSpeed)
	id := r.upgradeCluster()
	r.srv.Journal.Reset()

	d, c := r.call("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": "v1.30.3"})
	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)

	names, calls := r.upgradeCalls()
	require.Equal(t, []string{"default-master", "default-worker", "pool-a", "pool-b"}, names,
		"the master first, then the workers by name, one call each")
	tasks := r.upgradeTasks(id)
	for i := 1; i < len(calls); i++ {
		prev := tasks[names[i-1]]
		assert.Equal(t, nks.TaskSuccess, prev.State)
		finished, err := nks.ParseTime(prev.UpdatedAt)
		require.NoError(t, err)
		assert.False(t, calls[i].Time.Before(finished), "%s was called at %s, before %s's task finished at %s",
			names[i], calls[i].Time, names[i-1], finished)
		assert.GreaterOrEqual(t, calls[i].Time.Sub(calls[i-1].Time), simnks.DefaultDurations[nks.EventNodeGroupUpgrade],
			"%s was called only after %s's upgrade had run its full duration", names[i], names[i-1])
	}
	assert.Equal(t, "v1.30.3", out["version"])
	assert.Equal(t, []any{"default-master", "default-worker", "pool-a", "pool-b"}, out["upgraded"])
	assert.Equal(t, []any{}, out["skipped"])
	want := map[string]any{}
	for _, n := range names {
		want[n] = tasks[n].UUID
	}
	assert.Equal(t, want, out["tasks"])
	for _, g := range []string{"default-worker", "pool-a", "pool-b"} {
		ng, err := r.cl.GetNodeGroup(context.Background(), id, g)
		require.NoError(t, err)
		assert.Equal(t, "v1.30.3", ng.KubeTag(), g)
	}
}

func TestClusterUpgrade(t *testing.T) {
	t.Run("groups already at the version are skipped", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		id := r.upgradeCluster()
		ctx := context.Background()
		for _, g := range []string{nks.MasterNodeGroup, "pool-a"} {
			_, err := r.cl.UpgradeNodeGroup(ctx, id, g, nks.UpgradeRequest{Version: "v1.30.3"})
			require.NoError(t, err)
			r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventNodeGroupUpgrade])
		}
		r.srv.Journal.Reset()
		d, c := r.call("nks.cluster.upgrade", map[string]any{"cluster": id, "version": "v1.30.3"})
		out, err := d.Run(ctx, c)
		require.NoError(t, err)
		names, _ := r.upgradeCalls()
		assert.Equal(t, []string{"default-worker", "pool-b"}, names)
		assert.Equal(t, []any{"default-worker", "pool-b"}, out["upgraded"])
		assert.Equal(t, []any{"default-master", "pool-a"}, out["skipped"])
	})

	t.Run("node_groups restricts the workers and sets their order", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		r.upgradeCluster()
		r.srv.Journal.Reset()
		d, c := r.call("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": "v1.30.3",
			"node_groups": []any{"pool-b", "default-worker"}, "num_max_unavailable_nodes": 1})
		_, err := d.Run(context.Background(), c)
		require.NoError(t, err)
		names, calls := r.upgradeCalls()
		assert.Equal(t, []string{"default-master", "pool-b", "default-worker"}, names)
		assert.JSONEq(t, `{"version":"v1.30.3","num_max_unavailable_nodes":1}`, calls[1].Body)
		assert.JSONEq(t, `{"version":"v1.30.3"}`, calls[0].Body, "the rolling settings are for workers")

		_, c = r.call("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": "v1.31.4", "node_groups": []any{"pool-z"}})
		_, err = d.Run(context.Background(), c)
		assert.Equal(t, fault.NotFound, fault.CodeOf(err))
		assert.Contains(t, err.Error(), `no worker node group "pool-z" (it has: default-worker, pool-a, pool-b)`)
	})

	t.Run("a version /v1/supports does not mark true is refused before any change", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		r.upgradeCluster()
		for version, want := range map[string]string{
			"v1.26.3": "version v1.26.3 is no longer supported; supported versions: v1.27.3, v1.28.3, v1.29.3, v1.30.3, v1.31.4",
			"v1.99.0": "version v1.99.0 is not offered by the service; supported versions: v1.27.3",
			"v1.28.3": "downgrading to v1.28.3 is not supported",
		} {
			d, c := r.call("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": version})
			_, err := d.Run(context.Background(), c)
			assert.Equal(t, fault.Invalid, fault.CodeOf(err), version)
			assert.ErrorContains(t, err, want)
		}
		names, _ := r.upgradeCalls()
		assert.Empty(t, names, "nothing was upgraded")
	})

	t.Run("a FAIL task stops the upgrade with the task's contents", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		r.upgradeCluster()
		r.svc.FailNext(simnks.Failure{Operation: nks.EventNodeGroupUpgrade, Nodegroup: "pool-a",
			Contents: "drain of node pool-a-1 timed out: PodDisruptionBudget blocks eviction"})
		d, c := r.call("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": "v1.30.3"})
		_, err := d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Equal(t, fault.Failed, fault.CodeOf(err))
		assert.ErrorContains(t, err, "upgrade of node group pool-a to v1.30.3")
		assert.ErrorContains(t, err, "drain of node pool-a-1 timed out: PodDisruptionBudget blocks eviction")
		names, _ := r.upgradeCalls()
		assert.Equal(t, []string{"default-master", "default-worker", "pool-a"}, names, "pool-b is not touched")
		cp := lastUpgrade(t, stepstest.HostOf(c).LastCheckpoint())
		assert.Equal(t, groupFailed, cp.Groups[2].State)
		assert.Equal(t, groupPending, cp.Groups[3].State)

		// A retry (next attempt) upgrades pool-a again, and only what is left.
		d, again := r.resumed("nks.cluster.upgrade", map[string]any{"cluster": "prod", "version": "v1.30.3"}, c)
		again.Attempt = 2
		out, err := d.Run(context.Background(), again)
		require.NoError(t, err)
		names, _ = r.upgradeCalls()
		assert.Equal(t, []string{"default-master", "default-worker", "pool-a", "pool-a", "pool-b"}, names)
		assert.Equal(t, []any{"default-master", "default-worker", "pool-a", "pool-b"}, out["upgraded"])
	})
}

// dyingHost is a host whose process "dies" (every checkpoint fails) from
// the first checkpoint that matches.
type dyingHost struct {
	*stepstest.Host
	dieAt func(cp upgradeCheckpoint) bool
	dead  bool
}

func (h *dyingHost) Checkpoint(ctx context.Context, b []byte) error {
	var cp upgradeCheckpoint
	if h.dead || (json.Unmarshal(b, &cp) == nil && h.dieAt(cp)) {
		h.dead = true
		return context.Canceled
	}
	return h.Host.Checkpoint(ctx, b)
}

func TestClusterUpgradeResumes(t *testing.T) {
	with := map[string]any{"cluster": "prod", "version": "v1.30.3"}
	group := func(cp upgradeCheckpoint, name string) upgradeGroup {
		for _, g := range cp.Groups {
			if g.Name == name {
				return g
			}
		}
		return upgradeGroup{}
	}
	for _, tc := range []struct {
		name  string
		dieAt func(cp upgradeCheckpoint) bool
	}{
		{"killed while a worker's task is awaited", func(cp upgradeCheckpoint) bool {
			g := group(cp, "default-worker")
			return g.Wait != nil && g.Wait.TaskUUID != ""
		}},
		{"killed after the upgrade request of a worker, before its answer was recorded", func(cp upgradeCheckpoint) bool {
			return group(cp, "default-worker").State == groupWaiting // the save after the call is lost
		}},
		{"killed after the master's request, before its answer was recorded", func(cp upgradeCheckpoint) bool {
			return group(cp, nks.MasterNodeGroup).State == groupWaiting
		}},
	} {
		t.Run(tc.name+", the resumed run upgrades each group once", func(t *testing.T) {
			r := startFlowRig(t, upgradeSpeed)
			r.upgradeCluster()
			r.srv.Journal.Reset()
			d, c := r.call("nks.cluster.upgrade", with)
			h := &dyingHost{Host: stepstest.HostOf(c), dieAt: tc.dieAt}
			c.Host = h
			_, err := d.Run(context.Background(), c)
			require.Error(t, err, "the process died")
			c.Host = h.Host
			before, _ := r.upgradeCalls()
			require.NotEmpty(t, before)

			_, again := r.resumed("nks.cluster.upgrade", with, c)
			out, err := d.Run(context.Background(), again)
			require.NoError(t, err)
			names, _ := r.upgradeCalls()
			assert.Equal(t, []string{"default-master", "default-worker", "pool-a", "pool-b"}, names, "one upgrade call per node group")
			assert.Equal(t, []any{"default-master", "default-worker", "pool-a", "pool-b"}, out["upgraded"])
		})
	}

	t.Run("a request that never reached the service is sent again on resume", func(t *testing.T) {
		r := startFlowRig(t, upgradeSpeed)
		id := r.upgradeCluster()
		r.srv.Journal.Reset()
		r.srv.Faults.Add(sim.Fault{Service: "nks", Method: "POST", PathPrefix: "/v1/clusters/" + id + "/nodegroups/pool-a/upgrade", Status: 502, Count: 1})
		d, c := r.call("nks.cluster.upgrade", with)
		_, err := d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Equal(t, fault.Unavailable, fault.CodeOf(err), "an ambiguous answer: %v", err)
		assert.Equal(t, groupCalled, lastUpgrade(t, stepstest.HostOf(c).LastCheckpoint()).Groups[2].State)

		_, again := r.resumed("nks.cluster.upgrade", with, c)
		_, err = d.Run(context.Background(), again)
		require.NoError(t, err)
		names, calls := r.upgradeCalls()
		assert.Equal(t, []string{"default-master", "default-worker", "pool-a", "pool-a", "pool-b"}, names)
		var answered []string
		for i, call := range calls {
			if call.Fault == "" {
				answered = append(answered, names[i])
			}
		}
		assert.Equal(t, []string{"default-master", "default-worker", "pool-a", "pool-b"}, answered,
			"the service saw one upgrade per group")
	})
}
