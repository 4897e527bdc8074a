package nks_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/sim"
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

// TestEveryStepPassesTheContractWithItsExample runs the contract on every
// registered nks.* type, with the example its definition carries, against
// the simulator with every answer held back 5 s, so each step is cancelled
// in the middle of its first call.
func TestEveryStepPassesTheContractWithItsExample(t *testing.T) {
	require.Len(t, ownTypes, 23)
	opts := slowSimContract(t)
	var names []string
	for _, d := range steps.All() {
		if !strings.HasPrefix(d.Type, "nks.") {
			continue
		}
		names = append(names, d.Type)
		t.Run(d.Type, func(t *testing.T) {
			require.NotNil(t, d.Example, "%s has an example", d.Type)
			stepstest.ContractWith(t, d, d.Example, opts)
			require.NotNil(t, d.Plan, "%s plans its calls", d.Type)
			p, _, problems := d.Decode(d.Example)
			require.Empty(t, problems)
			assert.NotEmpty(t, d.Plan(p), "%s plans the calls of its example", d.Type)
		})
	}
	assert.Subset(t, names, slices.Concat(ownTypes, []string{"nks.task.wait", "nks.cluster.upgrade"}), "the operations and the composite steps")
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
