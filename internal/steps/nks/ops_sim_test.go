package nks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/sim"
	_ "github.com/runbook/runbook/internal/sim/identity"
	simnks "github.com/runbook/runbook/internal/sim/nks"
	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/nks"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

// opsSim is the cluster API simulator (with identity) over loopback, and
// the step calls made through it, counted by step type.
type opsSim struct {
	t    *testing.T
	srv  *sim.Server
	svc  *simnks.Service
	conn map[string]any
	ran  map[string]int
}

// startOpsSim starts the simulator with a fast clock: a 10-minute task
// takes 0.2s, so a waited step ends after its first second of polling.
func startOpsSim(t *testing.T) *opsSim {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Options{Services: []string{"identity", "nks"}, Speed: 3000,
		Start: time.Date(2026, 4, 4, 2, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return &opsSim{t: t, srv: srv, svc: srv.Service("nks").(*simnks.Service), conn: srv.Connections()["nks"], ran: map[string]int{}}
}

// call builds a call of typ on a TestHost whose "nks" connection is the
// simulator.
func (s *opsSim) call(typ string, with map[string]any) (*steps.Descriptor, *steps.Call) {
	s.t.Helper()
	d := desc(s.t, typ)
	c := stepstest.NewCall(s.t, d, with)
	stepstest.HostOf(c).Connections["nks"] = s.conn
	return d, c
}

// run runs typ and returns its outputs, failing the test on an error.
func (s *opsSim) run(typ string, with map[string]any) steps.Outputs {
	s.t.Helper()
	out, err := s.try(typ, with)
	require.NoError(s.t, err, "%s", typ)
	return out
}

// try runs typ and returns its outputs and error.
func (s *opsSim) try(typ string, with map[string]any) (steps.Outputs, error) {
	s.t.Helper()
	d, c := s.call(typ, with)
	s.ran[typ]++
	return d.Run(context.Background(), c)
}

// posts counts the mutating requests the simulator received below path.
func (s *opsSim) posts(path string) int {
	n := 0
	for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodDelete} {
		n += len(s.srv.Journal.Calls("nks", m, path))
	}
	return n
}

// settle lets the task of typ finish (steps run without wait).
func (s *opsSim) settle(typ string) { s.srv.Clock.Advance(simnks.DefaultDurations[typ]) }

// nodeOf reads the UUID of a node of the group from the simulator's answer
// ("nodes" is a simulator extra: the spec does not say where node UUIDs
// come from).
func (s *opsSim) nodeOf(cluster, group string) string {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.conn["base_url"].(string)+cloud.Path("clusters", cluster, "nodegroups", group), nil)
	require.NoError(s.t, err)
	req.Header.Set(cloud.HeaderToken, s.svc.Token())
	req.Header.Set(cloud.HeaderOpenStackVersion, cloud.APIVersion)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var g struct {
		Nodes []struct {
			UUID string `json:"uuid"`
		} `json:"nodes"`
	}
	require.NoError(s.t, json.NewDecoder(resp.Body).Decode(&g))
	require.NotEmpty(s.t, g.Nodes)
	return g.Nodes[0].UUID
}

// createWith is a valid nks.cluster.create `with`.
func createWith(name, version string) map[string]any {
	return map[string]any{
		"name": name, "keypair": "ops-key", "node_count": 2,
		"flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01", "fixed_network": "a1b2c3d4-0000-4000-8000-000000000001",
		"fixed_subnet": "a1b2c3d4-0000-4000-8000-000000000002",
		"labels": map[string]any{
			"availability_zone": "kr-pub-a", "node_image": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11",
			"boot_volume_type": "General HDD", "boot_volume_size": 50, "kube_tag": version,
			"master_lb_floating_ip_enabled": true, "pods_network_cidr": "10.100.0.0/16", "pods_network_subnet": 24,
			"cni_driver": "flannel",
		},
		"extra_labels": map[string]any{"clusterautoscale": "nodegroupfeature"},
	}
}

func groupWith(cluster, name string) map[string]any {
	return map[string]any{"cluster": cluster, "name": name, "flavor_id": "1c5b8e4b-4a57-4d51-9c6f-2b9b3f6a7a01",
		"image_id": "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11", "node_count": 2,
		"labels": map[string]any{"availability_zone": "kr-pub-b", "boot_volume_type": "General SSD", "boot_volume_size": 50}}
}

func TestEveryOperationThroughItsStepType(t *testing.T) {
	s := startOpsSim(t)
	const older, worker = "v1.30.3", "default-worker"

	sup := s.run("nks.supports", nil)
	assert.Equal(t, "v1.31.4", sup["latest"])
	assert.Equal(t, false, sup["versions"].(map[string]any)["v1.24.3"])
	assert.Equal(t, "v1.27.3", sup["supported"].([]any)[0], "oldest supported first")
	assert.Contains(t, sup["nodegroup_events"], cloud.EventNodeGroupUpgrade)
	latest := sup["latest"].(string)

	t.Run("create refuses a version /v1/supports does not mark true, before the call", func(t *testing.T) {
		_, err := s.try("nks.cluster.create", createWith("old", "v1.24.3"))
		require.Error(t, err)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "version v1.24.3 is no longer supported")
		assert.Zero(t, s.posts("/v1/clusters"))
	})

	with := createWith("prod", older)
	with["wait"] = true
	created := s.run("nks.cluster.create", with)
	id := created["uuid"].(string)
	assert.Equal(t, "prod", created["name"])
	assert.Equal(t, cloud.TaskSuccess, created["task_status"], "create waited for its task")
	assert.NotEmpty(t, created["task_uuid"])
	assert.Len(t, s.srv.Journal.Calls("nks", http.MethodPost, "/v1/clusters"), 1)

	list := s.run("nks.cluster.list", nil)
	assert.Equal(t, 1, list["count"])
	assert.Equal(t, id, list["clusters"].([]any)[0].(map[string]any)["uuid"])
	got := s.run("nks.cluster.get", map[string]any{"cluster": "prod"})
	assert.Equal(t, "CREATE_COMPLETE", got["status"])
	assert.Equal(t, older, got["kube_tag"])
	assert.Equal(t, "10.100.0.0/16", got["cluster"].(map[string]any)["labels"].(map[string]any)["pods_network_cidr"])

	kc := s.run("nks.cluster.kubeconfig", map[string]any{"cluster": id})
	assert.Contains(t, kc["kubeconfig"], "apiVersion")
	assert.Equal(t, "", kc["path"])

	acl := s.run("nks.cluster.ipacl.get", map[string]any{"cluster": "prod"})
	assert.Equal(t, false, acl["enable"])
	set := s.run("nks.cluster.ipacl.set", map[string]any{"cluster": "prod", "enable": true, "action": "ALLOW",
		"ipacl_targets": []any{map[string]any{"cidr_address": "203.0.113.0/24", "description": "office"}}})
	assert.Equal(t, id, set["uuid"])
	s.srv.Clock.Advance(5 * time.Minute)
	acl = s.run("nks.cluster.ipacl.get", map[string]any{"cluster": "prod"})
	assert.Equal(t, true, acl["enable"])
	assert.Equal(t, "ALLOW", acl["action"])
	assert.Equal(t, []any{map[string]any{"cidr_address": "203.0.113.0/24", "description": "office"}}, acl["ipacl_targets"])

	groups := s.run("nks.nodegroup.list", map[string]any{"cluster": "prod"})
	assert.GreaterOrEqual(t, groups["count"], 1)
	var names []any
	for _, g := range groups["nodegroups"].([]any) {
		names = append(names, g.(map[string]any)["name"])
	}
	assert.Contains(t, names, worker)
	w := s.run("nks.nodegroup.get", map[string]any{"cluster": "prod", "nodegroup": worker})
	assert.Equal(t, 2, w["node_count"])

	gw := groupWith("prod", "pool-b")
	gw["wait"] = true
	ng := s.run("nks.nodegroup.create", gw)
	assert.Equal(t, "pool-b", ng["name"])
	assert.Equal(t, id, ng["cluster_uuid"])
	assert.Equal(t, cloud.TaskSuccess, ng["task_status"])

	as := s.run("nks.nodegroup.autoscaler.get", map[string]any{"cluster": "prod", "nodegroup": "pool-b"})
	assert.Equal(t, false, as["ca_enable"])
	s.run("nks.nodegroup.autoscaler.set", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "ca_enable": true,
		"ca_max_node_count": 5, "ca_min_node_count": 1, "wait": true})
	as = s.run("nks.nodegroup.autoscaler.get", map[string]any{"cluster": "prod", "nodegroup": "pool-b"})
	assert.Equal(t, true, as["ca_enable"])
	assert.Equal(t, 5, as["ca_max_node_count"])

	rs := s.run("nks.cluster.resize", map[string]any{"cluster": "prod", "nodegroup": worker, "node_count": 3, "wait": true})
	assert.Equal(t, id, rs["uuid"])
	assert.Equal(t, w["uuid"], rs["nodegroup_uuid"])
	assert.Equal(t, cloud.TaskSuccess, rs["task_status"])
	assert.Equal(t, 3, s.run("nks.nodegroup.get", map[string]any{"cluster": "prod", "nodegroup": worker})["node_count"])

	node := s.nodeOf("prod", worker)
	for _, typ := range []string{"nks.nodegroup.stop_nodes", "nks.nodegroup.start_nodes"} {
		out := s.run(typ, map[string]any{"cluster": "prod", "nodegroup": worker, "node_list": []any{node}, "wait": true})
		assert.Equal(t, w["uuid"], out["uuid"], typ)
		assert.Equal(t, cloud.TaskSuccess, out["task_status"], typ)
	}
	stops := s.srv.Journal.Calls("nks", http.MethodPost, cloud.Path("clusters", "prod", "nodegroups", worker, "stop_node"))
	require.Len(t, stops, 1)
	assert.JSONEq(t, `{"node_list":"`+node+`"}`, stops[0].Body)

	t.Run("a worker upgrade above the master is refused before the call", func(t *testing.T) {
		_, err := s.try("nks.nodegroup.upgrade", map[string]any{"cluster": "prod", "nodegroup": worker, "version": latest})
		require.Error(t, err)
		assert.Equal(t, fault.Invalid, fault.CodeOf(err))
		assert.Contains(t, err.Error(), "upgrade default-master to "+latest+" first")
		_, err = s.try("nks.nodegroup.upgrade", map[string]any{"cluster": "prod", "nodegroup": cloud.MasterNodeGroup, "version": "v1.24.3"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no longer supported")
		for _, g := range []string{worker, cloud.MasterNodeGroup} {
			assert.Zero(t, s.posts(cloud.Path("clusters", "prod", "nodegroups", g, "upgrade")), "no upgrade was sent")
		}
	})
	for _, g := range []string{cloud.MasterNodeGroup, worker} {
		up := s.run("nks.nodegroup.upgrade", map[string]any{"cluster": "prod", "nodegroup": g, "version": latest,
			"num_buffer_nodes": 1, "num_max_unavailable_nodes": 1, "wait": true})
		assert.Equal(t, cloud.TaskSuccess, up["task_status"], g)
	}
	assert.Equal(t, latest, s.run("nks.nodegroup.get", map[string]any{"cluster": "prod", "nodegroup": worker})["kube_tag"])

	us := s.run("nks.nodegroup.userscript", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "contents": "#!/bin/sh\necho hi\n", "wait": true})
	assert.Equal(t, ng["uuid"], us["uuid"])
	fl := s.run("nks.nodegroup.flavor", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "flavor_id": "2d6c9f5c-5b68-4e62-8d7a-3c0c4a7b8b02", "wait": true})
	assert.Equal(t, cloud.TaskSuccess, fl["task_status"])
	assert.Equal(t, "2d6c9f5c-5b68-4e62-8d7a-3c0c4a7b8b02",
		s.run("nks.nodegroup.get", map[string]any{"cluster": "prod", "nodegroup": "pool-b"})["nodegroup"].(map[string]any)["flavor_id"])
	patches := s.srv.Journal.Calls("nks", http.MethodPatch, "/v1/clusters")
	require.Len(t, patches, 1)
	assert.JSONEq(t, `{"type":"flavor_id","flavor_id":"2d6c9f5c-5b68-4e62-8d7a-3c0c4a7b8b02"}`, patches[0].Body)

	cni := s.run("nks.cluster.cni_update", map[string]any{"cluster": "prod", "pod_cidr": "10.200.0.0/16", "wait": true})
	assert.Equal(t, cloud.TaskSuccess, cni["task_status"])
	assert.Equal(t, "calico", s.run("nks.cluster.get", map[string]any{"cluster": "prod"})["cluster"].(map[string]any)["labels"].(map[string]any)["cni_driver"])

	tasks := s.run("nks.task.list", map[string]any{"cluster": "prod"})
	assert.GreaterOrEqual(t, tasks["count"], 10)
	ups := s.run("nks.task.list", map[string]any{"cluster": id, "type": cloud.EventNodeGroupUpgrade, "state": "SUCCESS"})
	require.Equal(t, 2, ups["count"], "master and worker upgrades")
	first := ups["tasks"].([]any)[0].(map[string]any)
	one := s.run("nks.task.get", map[string]any{"cluster": "prod", "task": first["uuid"]})
	assert.Equal(t, cloud.TaskSuccess, one["state"])
	assert.Equal(t, first["uuid"], one["task"].(map[string]any)["uuid"])

	del := s.run("nks.nodegroup.delete", map[string]any{"cluster": "prod", "nodegroup": "pool-b", "wait": true})
	assert.Equal(t, ng["uuid"], del["uuid"])
	_, err := s.try("nks.nodegroup.get", map[string]any{"cluster": "prod", "nodegroup": "pool-b"})
	assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)

	gone := s.run("nks.cluster.delete", map[string]any{"cluster": "prod", "wait": true})
	assert.Equal(t, id, gone["uuid"])
	assert.Equal(t, cloud.TaskSuccess, gone["task_status"])
	_, err = s.try("nks.cluster.get", map[string]any{"cluster": "prod"})
	assert.Equal(t, fault.NotFound, fault.CodeOf(err), "%v", err)

	for _, typ := range ownTypes {
		assert.NotZero(t, s.ran[typ], "%s was exercised against the simulator", typ)
	}
}

func TestStepsWithoutWaitReturnAtOnceWithEmptyTaskOutputs(t *testing.T) {
	s := startOpsSim(t)
	out := s.run("nks.cluster.create", createWith("quick", "v1.31.4"))
	assert.Equal(t, "", out["task_uuid"])
	assert.Equal(t, "", out["task_status"])
	s.settle(cloud.EventClusterCreate)
	out = s.run("nks.cluster.resize", map[string]any{"cluster": "quick", "nodegroup": "default-worker", "node_count": 4})
	assert.Equal(t, "", out["task_status"])
	assert.Len(t, s.srv.Journal.Calls("nks", http.MethodPost, cloud.Path("clusters", "quick", "actions", "resize")), 1)
}

func TestWaitFailsWithTheTaskContents(t *testing.T) {
	s := startOpsSim(t)
	s.run("nks.cluster.create", createWith("prod", "v1.30.3"))
	s.settle(cloud.EventClusterCreate)
	s.svc.FailNext(simnks.Failure{Operation: cloud.EventNodeGroupUpgrade, Contents: "master upgrade failed: etcd unhealthy"})
	_, err := s.try("nks.nodegroup.upgrade", map[string]any{"cluster": "prod", "nodegroup": cloud.MasterNodeGroup, "version": "v1.31.4", "wait": true})
	require.Error(t, err)
	assert.Equal(t, fault.Failed, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "etcd unhealthy")
}

func TestKubeconfigIsSavedInsideThePlaybookDirectory(t *testing.T) {
	s := startOpsSim(t)
	s.run("nks.cluster.create", createWith("prod", "v1.31.4"))
	s.settle(cloud.EventClusterCreate)
	with := map[string]any{"cluster": "prod", "file": "out/kubeconfig.yaml"}
	d, c := s.call("nks.cluster.kubeconfig", with)

	out, err := d.Run(context.Background(), c)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("out", "kubeconfig.yaml"), out["path"])
	assert.Equal(t, "", out["kubeconfig"], "the credentials are not output when saved")
	path := filepath.Join(c.Dir, "out", "kubeconfig.yaml")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "apiVersion")

	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	_, err = d.Run(context.Background(), c)
	require.Error(t, err, "an existing file is kept")
	assert.Equal(t, fault.Conflict, fault.CodeOf(err))
	assert.Contains(t, err.Error(), "overwrite: true")
	b, _ = os.ReadFile(path)
	assert.Equal(t, "old", string(b))

	d, c2 := s.call("nks.cluster.kubeconfig", map[string]any{"cluster": "prod", "file": "out/kubeconfig.yaml", "overwrite": true})
	c2.Dir = c.Dir
	_, err = d.Run(context.Background(), c2)
	require.NoError(t, err)
	b, _ = os.ReadFile(path)
	assert.Contains(t, string(b), "apiVersion")
	entries, _ := os.ReadDir(filepath.Join(c.Dir, "out"))
	assert.Len(t, entries, 1, "no temporary file is left")

	t.Run("a symbolic link cannot lead out of the directory", func(t *testing.T) {
		outside := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(c.Dir, "link")))
		d, c3 := s.call("nks.cluster.kubeconfig", map[string]any{"cluster": "prod", "file": "link/kc"})
		c3.Dir = c.Dir
		_, err := d.Run(context.Background(), c3)
		require.Error(t, err)
		_, statErr := os.Stat(filepath.Join(outside, "kc"))
		assert.True(t, os.IsNotExist(statErr), "nothing was written outside")
	})
	for _, bad := range []string{"../kc", "/tmp/kc", ""} {
		if bad == "" {
			continue
		}
		problems := desc(t, "nks.cluster.kubeconfig").CheckLiteral(map[string]any{"cluster": "prod", "file": bad})
		require.NotEmpty(t, problems, bad)
		assert.True(t, strings.Contains(problems[0].Message, "relative path inside the playbook directory"), problems[0].Message)
	}
}

func TestAutoscalerScaleDownThresholdIsThePercentageTheServiceTakes(t *testing.T) {
	s := startOpsSim(t)
	s.run("nks.cluster.create", createWith("prod", "v1.31.4"))
	s.settle(cloud.EventClusterCreate)
	s.run("nks.nodegroup.autoscaler.set", map[string]any{"cluster": "prod", "nodegroup": "default-worker", "ca_enable": true,
		"ca_scale_down_util_thresh": 60, "wait": true})
	as := s.run("nks.nodegroup.autoscaler.get", map[string]any{"cluster": "prod", "nodegroup": "default-worker"})
	assert.Equal(t, 60, as["ca_scale_down_util_thresh"], "the value reads back as set")

	problems := desc(t, "nks.nodegroup.autoscaler.set").CheckLiteral(map[string]any{"cluster": "prod", "nodegroup": "default-worker",
		"ca_enable": true, "ca_scale_down_util_thresh": 0.5})
	require.NotEmpty(t, problems, "a fraction is not a percentage")
	assert.Equal(t, "ca_scale_down_util_thresh", problems[0].Path)
}
