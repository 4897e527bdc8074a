package nks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simnks "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// flowRig is the cluster API simulator over loopback with a client, for
// the composite steps (task wait, ordered upgrade, reconcile).
type flowRig struct {
	t    *testing.T
	srv  *sim.Server
	svc  *simnks.Service
	cl   *nks.Client
	conn map[string]any
}

// startFlowRig starts the simulator (identity and nks) at a fixed time with
// its clock at speed (simulated seconds per real second), and makes task
// polls fast for the test.
func startFlowRig(t *testing.T, speed float64) *flowRig {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks"}, Speed: speed,
		Start: time.Date(2026, 3, 7, 3, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.Connections()["nks"]
	cfg, err := nks.ConfigFrom(conn, staticTokens(conn["token"].(string)))
	require.NoError(t, err)
	cl, err := nks.New(cfg)
	require.NoError(t, err)
	oldMin, oldMax := pollMin, pollMax
	pollMin, pollMax = 5*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { pollMin, pollMax = oldMin, oldMax })
	return &flowRig{t: t, srv: srv, svc: srv.Service("nks").(*simnks.Service), cl: cl, conn: conn}
}

// call builds a Call of step type typ whose host reaches the simulator as
// the "nks" connection.
func (r *flowRig) call(typ string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	r.t.Helper()
	d, ok := steps.Lookup(typ)
	require.True(r.t, ok, "step type %s is registered", typ)
	c := stepstest.NewCall(r.t, d, with)
	stepstest.HostOf(c).Connections["nks"] = r.conn
	return d, c
}

// resumed is a new attempt-1 call of the same step on a fresh host, given
// the last checkpoint of c: what a restarted process would run.
func (r *flowRig) resumed(typ string, with map[string]any, c *steps.Call) (*steps.Descriptor, *steps.Call) {
	r.t.Helper()
	d, next := r.call(typ, with)
	next.Resume = stepstest.HostOf(c).LastCheckpoint()
	require.NotNil(r.t, next.Resume, "the first run checkpointed")
	return d, next
}

// createCluster creates a cluster at version and lets its create finish.
func (r *flowRig) createCluster(name, version string) string {
	r.t.Helper()
	id, err := r.cl.CreateCluster(context.Background(), clusterRequest(name, version))
	require.NoError(r.t, err)
	r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventClusterCreate])
	got, err := r.cl.GetCluster(context.Background(), id)
	require.NoError(r.t, err)
	require.Equal(r.t, "CREATE_COMPLETE", got.Status)
	return id
}

// addGroup creates a worker node group and lets the create finish.
func (r *flowRig) addGroup(cluster, name string) string {
	r.t.Helper()
	g, err := r.cl.CreateNodeGroup(context.Background(), cluster, groupRequest(name))
	require.NoError(r.t, err)
	r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventNodeGroupCreate])
	return g.UUID
}

func clusterRequest(name, version string) nks.CreateClusterRequest {
	return nks.CreateClusterRequest{Name: name, Keypair: "ops-key", NodeCount: 2,
		FlavorID: "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01", FixedNetwork: "a1b2c3d4-0000-4000-8000-000000000001",
		FixedSubnet: "a1b2c3d4-0000-4000-8000-000000000002",
		Labels: nks.ClusterLabels{AvailabilityZone: "kr-pub-a", NodeImage: "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
			BootVolumeType: "General HDD", BootVolumeSize: "50", CertManagerAPI: "True", CAEnable: "False", KubeTag: version,
			MasterLBFloatingIPEnabled: "True"}}
}

func groupRequest(name string) nks.CreateNodeGroupRequest {
	return nks.CreateNodeGroupRequest{Name: name, FlavorID: "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		ImageID: "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11", NodeCount: 1,
		Labels: nks.NodeGroupLabels{AvailabilityZone: "kr-pub-a", BootVolumeType: "General SSD", BootVolumeSize: "50", CAEnable: "False"}}
}

// staticTokens is a token source that always answers tok.
type staticTokens string

func (s staticTokens) Token(context.Context) (string, error) { return string(s), nil }
func (s staticTokens) Invalidate(string)                     {}

// lastWait decodes the wait state of the newest checkpoint of nks.task.wait.
func lastWait(t *testing.T, c *steps.Call) taskWaitCheckpoint {
	t.Helper()
	var cp taskWaitCheckpoint
	if b := stepstest.HostOf(c).LastCheckpoint(); b != nil {
		require.NoError(t, json.Unmarshal(b, &cp))
	}
	return cp
}

// eventually polls cond every few milliseconds for up to 5 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 2*time.Millisecond, what)
}

func TestTaskWait(t *testing.T) {
	t.Run("a wait returns SUCCESS once the simulated clock passes the task's end", func(t *testing.T) {
		r := startFlowRig(t, 1)
		id, err := r.cl.CreateCluster(context.Background(), clusterRequest("prod", "v1.30.3"))
		require.NoError(t, err)
		with := map[string]any{"cluster": "prod", "event_type": "CLUSTER_CREATE"}
		d, c := r.call("nks.task.wait", with)
		type result struct {
			out steps.Outputs
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := d.Run(context.Background(), c)
			done <- result{out, err}
		}()
		eventually(t, "the wait found the create task", func() bool {
			cp := lastWait(t, c)
			return cp.Wait != nil && cp.Wait.TaskUUID != ""
		})
		select {
		case res := <-done:
			t.Fatalf("the wait ended before the task did: %v %v", res.out, res.err)
		case <-time.After(50 * time.Millisecond):
		}
		r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventClusterCreate])
		res := <-done
		require.NoError(t, res.err)
		cp := lastWait(t, c)
		assert.Equal(t, steps.Outputs{"task_uuid": cp.Wait.TaskUUID, "status": "SUCCESS", "contents": "", "type": "CLUSTER_CREATE"}, res.out)
		assert.Equal(t, id, cp.Wait.ClusterUUID, "the cluster name is resolved to its UUID")
		assert.Equal(t, id, cp.Wait.ResourceUUID, "the resource defaults to the cluster")
	})

	t.Run("a task that ends in FAIL fails the step with its contents", func(t *testing.T) {
		r := startFlowRig(t, 1)
		r.createCluster("prod", "v1.30.3")
		r.svc.FailNext(simnks.Failure{Operation: nks.EventNodeGroupUpgrade, Cluster: "prod",
			Contents: "master upgrade failed: etcd quorum lost"})
		gid, err := r.cl.UpgradeNodeGroup(context.Background(), "prod", nks.MasterNodeGroup, nks.UpgradeRequest{Version: "v1.31.4"})
		require.NoError(t, err)
		r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventNodeGroupUpgrade])
		d, c := r.call("nks.task.wait", map[string]any{"cluster": "prod", "resource": gid, "event_type": "NODEGROUP_UPGRADE"})
		_, err = d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Equal(t, fault.Failed, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "master upgrade failed: etcd quorum lost")
		var se *fault.Error
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "master upgrade failed: etcd quorum lost", se.Data["contents"])
	})

	t.Run("a task that does not end before the timeout fails with a timeout", func(t *testing.T) {
		r := startFlowRig(t, 1)
		_, err := r.cl.CreateCluster(context.Background(), clusterRequest("prod", "v1.30.3"))
		require.NoError(t, err)
		d, c := r.call("nks.task.wait", map[string]any{"cluster": "prod", "event_type": "CLUSTER_CREATE", "timeout": "1s"})
		start := time.Now()
		_, err = d.Run(context.Background(), c)
		require.Error(t, err)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err), "error: %v", err)
		assert.Contains(t, err.Error(), "CLUSTER_CREATE task")
		assert.Less(t, time.Since(start), 3*time.Second)
	})

	t.Run("a resumed wait keeps waiting on the same task and deadline", func(t *testing.T) {
		r := startFlowRig(t, 1)
		r.createCluster("prod", "v1.29.3")
		_, err := r.cl.UpgradeNodeGroup(context.Background(), "prod", nks.MasterNodeGroup, nks.UpgradeRequest{Version: "v1.30.3"})
		require.NoError(t, err)
		with := map[string]any{"cluster": "prod", "resource": nks.MasterNodeGroup, "event_type": "NODEGROUP_UPGRADE", "timeout": "5s"}
		d, c := r.call("nks.task.wait", with)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := d.Run(ctx, c); done <- err }()
		eventually(t, "the wait found the upgrade task", func() bool {
			cp := lastWait(t, c)
			return cp.Wait != nil && cp.Wait.TaskUUID != ""
		})
		cancel() // the process dies while waiting
		require.ErrorIs(t, <-done, context.Canceled)
		first := lastWait(t, c)

		// Meanwhile the first upgrade ends and a newer one starts: a fresh
		// wait would pick the newer task, a resumed one must not.
		r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventNodeGroupUpgrade])
		_, err = r.cl.UpgradeNodeGroup(context.Background(), "prod", nks.MasterNodeGroup, nks.UpgradeRequest{Version: "v1.31.4"})
		require.NoError(t, err)

		d, again := r.resumed("nks.task.wait", with, c)
		out, err := d.Run(context.Background(), again)
		require.NoError(t, err)
		assert.Equal(t, first.Wait.TaskUUID, out["task_uuid"])
		assert.Equal(t, "SUCCESS", out["status"])
		assert.Empty(t, stepstest.HostOf(again).Checkpoints(), "neither the task nor the deadline moved")

		_, fresh := r.call("nks.task.wait", map[string]any{"cluster": "prod", "resource": nks.MasterNodeGroup,
			"event_type": "NODEGROUP_UPGRADE", "timeout": "1s"})
		_, err = d.Run(context.Background(), fresh)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err), "a fresh wait picks the newer, unfinished upgrade: %v", err)
		assert.NotEqual(t, first.Wait.TaskUUID, lastWait(t, fresh).Wait.TaskUUID)
	})

	t.Run("after_task makes older tasks of the type known", func(t *testing.T) {
		r := startFlowRig(t, 1)
		id := r.createCluster("prod", "v1.29.3")
		_, err := r.cl.UpgradeNodeGroup(context.Background(), "prod", nks.MasterNodeGroup, nks.UpgradeRequest{Version: "v1.30.3"})
		require.NoError(t, err)
		r.srv.Clock.Advance(simnks.DefaultDurations[nks.EventNodeGroupUpgrade])
		old, err := r.cl.LatestEvent(context.Background(), id, "", nks.EventNodeGroupUpgrade, time.Time{})
		require.NoError(t, err)
		d, c := r.call("nks.task.wait", map[string]any{"cluster": id, "resource": nks.MasterNodeGroup,
			"event_type": "NODEGROUP_UPGRADE", "after_task": old.UUID, "timeout": "1s"})
		_, err = d.Run(context.Background(), c)
		assert.Equal(t, fault.Timeout, fault.CodeOf(err), "no upgrade newer than after_task: %v", err)
		assert.Contains(t, lastWait(t, c).Wait.Known, old.UUID)

		_, c = r.call("nks.task.wait", map[string]any{"cluster": id, "event_type": "NODEGROUP_UPGRADE",
			"after_task": "5b1e0f6a-0000-4000-8000-00000000dead"})
		_, err = d.Run(context.Background(), c)
		assert.Equal(t, fault.NotFound, fault.CodeOf(err))
		assert.True(t, strings.Contains(err.Error(), "after_task"), err.Error())
	})
}
