package nks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
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

// TestEveryStepPlansTheCallsOfItsExample checks every registered nks.*
// type: it has an example, and its plan shows the calls of that example;
// the operations and the composite steps are all registered. (The contract
// suite runs over every registered type in internal/steps/all.)
func TestEveryStepPlansTheCallsOfItsExample(t *testing.T) {
	require.Len(t, ownTypes, 23)
	var names []string
	for _, d := range steps.All() {
		if !strings.HasPrefix(d.Type, "nks.") {
			continue
		}
		names = append(names, d.Type)
		t.Run(d.Type, func(t *testing.T) {
			require.NotNil(t, d.Example, "%s has an example", d.Type)
			require.NotNil(t, d.Plan, "%s plans its calls", d.Type)
			p, _, problems := d.Decode(d.Example)
			require.Empty(t, problems)
			assert.NotEmpty(t, d.Plan(p), "%s plans the calls of its example", d.Type)
		})
	}
	assert.Subset(t, names, slices.Concat(ownTypes, []string{"nks.task.wait", "nks.cluster.upgrade"}), "the operations and the composite steps")
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
