package nks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/cloud/identity"
	"github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simnks "github.com/runbook/runbook/internal/sim/nks"
)

// simEnv is the simulator with identity and nks, and a client that signs
// in with the identity credentials the simulator advertises.
type simEnv struct {
	t   *testing.T
	srv *sim.Server
	c   *nks.Client
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks"},
		Start: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	conn := s.Connections()["nks"]
	delete(conn, "token") // sign in through the identity endpoint
	icfg, err := identity.ConfigFrom(conn)
	require.NoError(t, err)
	icfg.Now = s.Clock.Now
	src, err := identity.New(icfg)
	require.NoError(t, err)
	cfg, err := nks.ConfigFrom(conn, src)
	require.NoError(t, err)
	c, err := nks.New(cfg)
	require.NoError(t, err)
	return &simEnv{t: t, srv: s, c: c}
}

// finish lets the task of typ that the call at `at` started reach SUCCESS.
func (e *simEnv) finish(clusterUUID, resourceUUID, typ string, at time.Time) *nks.Task {
	e.t.Helper()
	ctx := context.Background()
	task, err := e.c.LatestEvent(ctx, clusterUUID, resourceUUID, typ, at)
	require.NoError(e.t, err)
	require.NotNil(e.t, task, "no %s task on %s", typ, resourceUUID)
	assert.Equal(e.t, nks.TaskInProgress, task.State)
	e.srv.Clock.Advance(simnks.DefaultDurations[typ])
	done, err := e.c.GetTask(ctx, clusterUUID, task.UUID)
	require.NoError(e.t, err)
	require.Equal(e.t, nks.TaskSuccess, done.State, done.Contents)
	return done
}

func TestEveryOperationAgainstTheSimulator(t *testing.T) {
	e := startSim(t)
	ctx := context.Background()
	now := e.srv.Clock.Now

	sup, err := e.c.Supports(ctx)
	require.NoError(t, err)
	latest := sup.Latest()
	require.NotEmpty(t, latest)
	assert.Contains(t, sup.SupportedEventType.NodeGroupEvents, nks.EventNodeGroupUpgrade)
	assert.Equal(t, "v1.31.4", latest)
	const older = "v1.30.3"

	at := now()
	id, err := e.c.CreateCluster(ctx, nks.CreateClusterRequest{Name: "prod", Keypair: "ops-key", NodeCount: 2,
		FlavorID: "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01", FixedNetwork: "a1b2c3d4-0000-4000-8000-000000000001",
		FixedSubnet: "a1b2c3d4-0000-4000-8000-000000000002",
		Labels: nks.ClusterLabels{AvailabilityZone: "kr-pub-a", NodeImage: "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
			BootVolumeType: "General HDD", BootVolumeSize: "50", CertManagerAPI: "True", CAEnable: "False", KubeTag: older,
			MasterLBFloatingIPEnabled: "True", PodsNetworkCIDR: "10.100.0.0/16", PodsNetworkSubnet: 24,
			Extra: map[string]string{"cni_driver": "flannel"}}})
	require.NoError(t, err)
	e.finish(id, id, nks.EventClusterCreate, at)

	_, err = e.c.CreateCluster(ctx, nks.CreateClusterRequest{Name: "prod"})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a create missing fields is refused: %v", err)

	list, err := e.c.ListClusters(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].UUID)
	cl, err := e.c.GetCluster(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, "CREATE_COMPLETE", cl.Status)
	assert.Equal(t, older, cl.KubeTag())
	assert.Equal(t, "10.100.0.0/16", cl.Labels["pods_network_cidr"])

	kc, err := e.c.Kubeconfig(ctx, id)
	require.NoError(t, err)
	assert.Contains(t, kc, "apiVersion")

	acl, err := e.c.GetIPACL(ctx, "prod")
	require.NoError(t, err)
	assert.False(t, acl.Enable.Bool())
	at = now()
	got, err := e.c.SetIPACL(ctx, "prod", nks.SetIPACLRequest{Enable: "true", Action: "ALLOW", Targets: []nks.IPACLTarget{{CIDRAddress: "203.0.113.0/24", Description: "office"}}})
	require.NoError(t, err)
	assert.Equal(t, id, got)
	e.srv.Clock.Advance(5 * time.Minute)
	acl, err = e.c.GetIPACL(ctx, "prod")
	require.NoError(t, err)
	assert.True(t, acl.Enable.Bool())
	assert.Equal(t, []nks.IPACLTarget{{CIDRAddress: "203.0.113.0/24", Description: "office"}}, acl.Targets)

	groups, err := e.c.ListNodeGroups(ctx, "prod")
	require.NoError(t, err)
	require.NotEmpty(t, groups)
	worker, err := e.c.GetNodeGroup(ctx, "prod", "default-worker")
	require.NoError(t, err)
	assert.Equal(t, 2, worker.NodeCount)

	at = now()
	ng, err := e.c.CreateNodeGroup(ctx, "prod", nks.CreateNodeGroupRequest{Name: "pool-b", FlavorID: worker.FlavorID, ImageID: worker.ImageID,
		Labels: nks.NodeGroupLabels{AvailabilityZone: "kr-pub-b", BootVolumeType: "General SSD", BootVolumeSize: "50", CAEnable: "False"}})
	require.NoError(t, err)
	assert.Equal(t, "pool-b", ng.Name)
	e.finish(id, ng.UUID, nks.EventNodeGroupCreate, at)
	_, err = e.c.CreateNodeGroup(ctx, "prod", nks.CreateNodeGroupRequest{Name: "pool-b", FlavorID: worker.FlavorID, ImageID: worker.ImageID,
		Labels: nks.NodeGroupLabels{AvailabilityZone: "kr-pub-b", BootVolumeType: "General SSD", BootVolumeSize: "50", CAEnable: "False"}})
	assert.Equal(t, fault.Conflict, fault.CodeOf(err), "a taken name: %v", err)

	as, err := e.c.GetAutoscaler(ctx, "prod", "pool-b")
	require.NoError(t, err)
	assert.False(t, as.CAEnable.Bool())
	at = now()
	gid, err := e.c.SetAutoscaler(ctx, "prod", "pool-b", nks.AutoscalerRequest{CAEnable: "True", CAMaxNodeCount: "5", CAMinNodeCount: "1"})
	require.NoError(t, err)
	assert.Equal(t, ng.UUID, gid)
	e.finish(id, ng.UUID, nks.EventNodeGroupSetAutoscaler, at)

	at = now()
	rid, err := e.c.ResizeCluster(ctx, "prod", nks.ResizeRequest{NodeGroup: "default-worker", NodeCount: 3})
	require.NoError(t, err)
	assert.Equal(t, id, rid)
	_, err = e.c.ResizeCluster(ctx, "prod", nks.ResizeRequest{NodeGroup: "default-worker", NodeCount: 4})
	assert.Equal(t, fault.InProgress, fault.CodeOf(err), "a second operation while one runs: %v", err)
	// The resize answers the cluster UUID; its task is a node group event.
	task, err := e.c.LatestEvent(ctx, id, "", nks.EventClusterResize, at)
	require.NoError(t, err)
	require.NotNil(t, task)
	assert.Equal(t, worker.UUID, task.ResourceUUID)
	assert.Equal(t, nks.ResourceTypeNodeGroup, task.ResourceType)
	e.finish(id, task.ResourceUUID, nks.EventClusterResize, at)
	_, err = e.c.ResizeCluster(ctx, "prod", nks.ResizeRequest{NodeGroup: "default-worker", NodeCount: 11})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err))

	node := firstNode(t, e, "prod", "default-worker")
	at = now()
	sid, err := e.c.StopNodes(ctx, "prod", "default-worker", nks.NodeActionRequest{NodeList: nks.JoinNodes(node)})
	require.NoError(t, err)
	assert.Equal(t, worker.UUID, sid)
	e.finish(id, worker.UUID, nks.EventNodeGroupNodeStop, at)
	at = now()
	_, err = e.c.StartNodes(ctx, "prod", "default-worker", nks.NodeActionRequest{NodeList: node})
	require.NoError(t, err)
	e.finish(id, worker.UUID, nks.EventNodeGroupNodeStart, at)

	_, err = e.c.UpgradeNodeGroup(ctx, "prod", "default-worker", nks.UpgradeRequest{Version: latest})
	assert.Equal(t, fault.Invalid, fault.CodeOf(err), "a worker may not pass the master: %v", err)
	var ae *nks.APIError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, http.StatusBadRequest, ae.Status)
	at = now()
	mid, err := e.c.UpgradeNodeGroup(ctx, "prod", nks.MasterNodeGroup, nks.UpgradeRequest{Version: latest})
	require.NoError(t, err)
	e.finish(id, mid, nks.EventNodeGroupUpgrade, at)

	at = now()
	_, err = e.c.UpgradeNodeGroup(ctx, "prod", "default-worker", nks.UpgradeRequest{Version: latest, NumBufferNodes: new(1), NumMaxUnavailableNodes: new(1)})
	require.NoError(t, err)
	e.finish(id, worker.UUID, nks.EventNodeGroupUpgrade, at)
	w, err := e.c.GetNodeGroup(ctx, "prod", "default-worker")
	require.NoError(t, err)
	assert.Equal(t, latest, w.KubeTag())

	at = now()
	_, err = e.c.SetUserScript(ctx, "prod", "pool-b", nks.UserScriptRequest{Contents: "#!/bin/sh\necho hi\n"})
	require.NoError(t, err)
	e.finish(id, ng.UUID, nks.EventNodeGroupUserScript, at)

	at = now()
	_, err = e.c.ChangeFlavor(ctx, "prod", "pool-b", nks.FlavorChangeRequest{FlavorID: "2d6c9f5c-5b68-4e62-8d7a-3c0c4a7b8b02"})
	require.NoError(t, err)
	e.finish(id, ng.UUID, nks.EventNodeGroupUpdateFlavor, at)

	at = now()
	_, err = e.c.UpdateCNI(ctx, "prod", nks.CNIUpdateRequest{CNI: nks.CNICalico, PodCIDR: "10.200.0.0/16", PodSubnet: "24"})
	require.NoError(t, err)
	e.finish(id, id, nks.EventClusterCNIUpdate, at)

	at = now()
	require.NoError(t, e.c.DeleteNodeGroup(ctx, "prod", "pool-b"))
	e.finish(id, ng.UUID, nks.EventNodeGroupDelete, at)
	_, err = e.c.GetNodeGroup(ctx, "prod", "pool-b")
	assert.Equal(t, fault.NotFound, fault.CodeOf(err))

	tasks, err := e.c.ListTasks(ctx, id)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(tasks), 10)

	require.NoError(t, e.c.DeleteCluster(ctx, "prod"))
	e.srv.Clock.Advance(simnks.DefaultDurations[nks.EventClusterDelete])
	_, err = e.c.GetCluster(ctx, "prod")
	assert.Equal(t, fault.NotFound, fault.CodeOf(err), "a 404 after a delete means it finished")
}

// firstNode reads the UUID of a node of the group from the simulator's
// node group answer ("nodes" is a simulator extra, not a spec field).
func firstNode(t *testing.T, e *simEnv, cluster, group string) string {
	t.Helper()
	req, err := http.NewRequest("GET", e.c.BaseURL()+nks.Path("clusters", cluster, "nodegroups", group), nil)
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", e.srv.Service("nks").(*simnks.Service).Token())
	req.Header.Set(nks.HeaderOpenStackVersion, nks.APIVersion)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var g struct {
		Nodes []struct {
			UUID string `json:"uuid"`
		} `json:"nodes"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&g))
	require.NotEmpty(t, g.Nodes)
	return g.Nodes[0].UUID
}
