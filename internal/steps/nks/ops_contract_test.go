package nks_test

import (
	"github.com/runbook/runbook/internal/sim"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func desc(t testing.TB, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

// ownTypes are the 23 step types of the spec's endpoint table.
var ownTypes = []string{
	"nks.cluster.list", "nks.cluster.get", "nks.cluster.create", "nks.cluster.delete", "nks.cluster.resize",
	"nks.cluster.kubeconfig", "nks.cluster.cni_update", "nks.cluster.ipacl.get", "nks.cluster.ipacl.set",
	"nks.nodegroup.list", "nks.nodegroup.get", "nks.nodegroup.create", "nks.nodegroup.delete",
	"nks.nodegroup.stop_nodes", "nks.nodegroup.start_nodes", "nks.nodegroup.autoscaler.get",
	"nks.nodegroup.autoscaler.set", "nks.nodegroup.upgrade", "nks.nodegroup.userscript", "nks.nodegroup.flavor",
	"nks.task.list", "nks.task.get", "nks.supports",
}

// contractWith holds params each type accepts.
var contractWith = map[string]map[string]any{
	"nks.cluster.list":       {},
	"nks.cluster.get":        {"cluster": "prod"},
	"nks.cluster.create":     createWith("prod", "v1.31.4"),
	"nks.cluster.delete":     {"cluster": "prod", "wait": true, "wait_timeout": "30m"},
	"nks.cluster.resize":     {"cluster": "prod", "nodegroup": "default-worker", "node_count": 10, "nodes_to_remove": []any{"n-1"}},
	"nks.cluster.kubeconfig": {"cluster": "prod", "file": "kube/config", "overwrite": true},
	"nks.cluster.cni_update": {"cluster": "prod", "pod_cidr": "10.200.0.0/22", "pod_subnet": 24, "num_buffer_nodes": 0, "num_max_unavailable_nodes": 2},
	"nks.cluster.ipacl.get":  {"cluster": "prod", "connection": "nks-kr2"},
	"nks.cluster.ipacl.set": {"cluster": "prod", "enable": true, "action": "DENY",
		"ipacl_targets": []any{map[string]any{"cidr_address": "198.51.100.7"}}},
	"nks.nodegroup.list":           {"cluster": "prod"},
	"nks.nodegroup.get":            {"cluster": "prod", "nodegroup": "pool-b"},
	"nks.nodegroup.create":         groupWith("prod", "pool-b"),
	"nks.nodegroup.delete":         {"cluster": "prod", "nodegroup": "pool-b"},
	"nks.nodegroup.stop_nodes":     {"cluster": "prod", "nodegroup": "pool-b", "node_list": []any{"a", "b"}},
	"nks.nodegroup.start_nodes":    {"cluster": "prod", "nodegroup": "pool-b", "node_list": []any{"a"}},
	"nks.nodegroup.autoscaler.get": {"cluster": "prod", "nodegroup": "pool-b"},
	"nks.nodegroup.autoscaler.set": {"cluster": "prod", "nodegroup": "pool-b", "ca_enable": true, "ca_min_node_count": 1, "ca_max_node_count": 3, "ca_scale_down_util_thresh": 50},
	"nks.nodegroup.upgrade":        {"cluster": "prod", "nodegroup": "default-master", "version": "v1.31.4"},
	"nks.nodegroup.userscript":     {"cluster": "prod", "nodegroup": "default-master", "contents": "#!/bin/sh\n"},
	"nks.nodegroup.flavor":         {"cluster": "prod", "nodegroup": "pool-b", "flavor_id": "f-2"},
	"nks.task.list":                {"cluster": "prod", "type": "NODEGROUP_UPGRADE", "state": "FAIL"},
	"nks.task.get":                 {"cluster": "prod", "task": "t-1"},
	"nks.supports":                 {},
}

// TestEveryOperationStepPassesTheContract runs the contract against the
// simulator with every answer held back 5 s, so each operation is
// cancelled in the middle of its first call.
func TestEveryOperationStepPassesTheContract(t *testing.T) {
	require.Len(t, ownTypes, 23)
	opts := slowSimContract(t)
	for _, name := range ownTypes {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, contractWith, name)
			stepstest.ContractWith(t, desc(t, name), contractWith[name], opts)
		})
	}
}

// slowSimContract starts the simulator with a 5 s latency on every call
// and returns contract options that connect the calls to it.
func slowSimContract(t *testing.T) stepstest.ContractOptions {
	t.Helper()
	s := startOpsSim(t)
	s.srv.Faults.Add(sim.Fault{Latency: 5 * time.Second})
	return stepstest.ContractOptions{Slow: true, Prepare: func(c *steps.Call) {
		stepstest.HostOf(c).Connections["nks"] = s.conn
		stepstest.HostOf(c).Connections["nks-kr2"] = s.conn // nks.cluster.ipacl.get names its connection
	}}
}

func TestMutatingOperationsAreMarkedAndReadsAreNotPure(t *testing.T) {
	mutating := map[string]bool{
		"nks.cluster.create": true, "nks.cluster.delete": true, "nks.cluster.resize": true, "nks.cluster.cni_update": true,
		"nks.cluster.ipacl.set": true, "nks.nodegroup.create": true, "nks.nodegroup.delete": true,
		"nks.nodegroup.stop_nodes": true, "nks.nodegroup.start_nodes": true, "nks.nodegroup.autoscaler.set": true,
		"nks.nodegroup.upgrade": true, "nks.nodegroup.userscript": true, "nks.nodegroup.flavor": true,
	}
	for _, name := range ownTypes {
		d := desc(t, name)
		require.Equal(t, mutating[name], d.Mutating, name)
		require.False(t, d.Pure, "%s reads external state", name)
		require.NotNil(t, d.Plan, "%s plans its calls", name)
		require.Contains(t, d.ParamNames(), "connection", name)
	}
}
