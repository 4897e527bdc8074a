package nks_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/steps"
)

// paramSchema returns the schema of the param at path in the params schema
// of typ, without the expression alternative: "node_count",
// "labels.pods_network_subnet", "ipacl_targets[].description" (the items
// of a list).
func paramSchema(t *testing.T, typ, path string) map[string]any {
	t.Helper()
	s := desc(t, typ).ParamsSchema()
	for _, part := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(part, "[]")
		props, ok := s["properties"].(map[string]any)
		require.True(t, ok, "%s: %s is in an object", typ, path)
		s, ok = props[name].(map[string]any)
		require.True(t, ok, "%s has a param %s", typ, path)
		s = literalSchema(s)
		if items {
			s = literalSchema(s["items"].(map[string]any))
		}
	}
	return s
}

// literalSchema is s without the alternative of an expression string.
func literalSchema(s map[string]any) map[string]any {
	if alts, ok := s["anyOf"].([]any); ok {
		return alts[0].(map[string]any)
	}
	return s
}

// TestTheSchemaCarriesTheSpecsLimits checks that each limit of the spec
// that applies to one param is in the params schema (and so in
// schema/playbook.schema.json, which editors use), with the value rules.go
// defines.
func TestTheSchemaCarriesTheSpecsLimits(t *testing.T) {
	type limit struct {
		types   []string
		path    string
		keyword string
		want    any
	}
	rolling := []string{"nks.nodegroup.upgrade", "nks.nodegroup.flavor", "nks.cluster.cni_update", "nks.cluster.upgrade"}
	versions := []limit{
		{[]string{"nks.nodegroup.upgrade", "nks.cluster.upgrade"}, "version", "pattern", cloud.VersionPattern},
		{[]string{"nks.cluster.create"}, "labels.kube_tag", "pattern", cloud.VersionPattern},
	}
	limits := []limit{
		{[]string{"nks.cluster.resize"}, "node_count", "minimum", cloud.MinResizeNodeCount},
		{[]string{"nks.cluster.resize"}, "node_count", "maximum", cloud.DefaultMaxNodeCount},
		{[]string{"nks.cluster.cni_update"}, "pod_subnet", "minimum", cloud.MinPodSubnet},
		{[]string{"nks.cluster.cni_update"}, "pod_subnet", "maximum", cloud.MaxPodSubnet},
		{[]string{"nks.cluster.create"}, "labels.pods_network_subnet", "minimum", cloud.MinPodSubnet},
		{[]string{"nks.cluster.create"}, "labels.pods_network_subnet", "maximum", cloud.MaxPodSubnet},
		{rolling, "num_buffer_nodes", "minimum", cloud.MinBufferNodes},
		{rolling, "num_max_unavailable_nodes", "minimum", cloud.MinMaxUnavailableNodes},
		{[]string{"nks.cluster.cni_update"}, "cni", "enum", []string{cloud.CNICalico}},
		{[]string{"nks.nodegroup.flavor"}, "type", "enum", []string{cloud.FlavorChangeType}},
		{[]string{"nks.cluster.ipacl.set"}, "action", "enum", []string{cloud.IPACLAllow, cloud.IPACLDeny}},
		{[]string{"nks.cluster.ipacl.set"}, "ipacl_targets[].description", "maxLength", cloud.MaxDescriptionLength},
		{[]string{"nks.cluster.create", "nks.nodegroup.create"}, "name", "maxLength", cloud.MaxNameLength},
		{[]string{"nks.nodegroup.stop_nodes", "nks.nodegroup.start_nodes"}, "node_list", "minItems", 1},
		{[]string{"nks.task.list"}, "state", "enum", []string{cloud.TaskSuccess, cloud.TaskFail, cloud.TaskInProgress}},
		{[]string{"nks.task.wait"}, "event_type", "enum", []string{
			cloud.EventClusterCreate, cloud.EventClusterDelete, cloud.EventClusterHandover, cloud.EventClusterCNIUpdate,
			cloud.EventNodeGroupCreate, cloud.EventNodeGroupDelete, cloud.EventClusterResize, cloud.EventNodeGroupUpdateFlavor,
			cloud.EventNodeGroupUpgrade, cloud.EventNodeGroupUserScript, cloud.EventNodeGroupSetAutoscaler,
			cloud.EventNodeGroupNodeStart, cloud.EventNodeGroupNodeStop}},
	}
	limits = append(limits, versions...)
	for _, d := range steps.All() {
		if !strings.HasPrefix(d.Type, "nks.") {
			continue
		}
		for _, name := range []string{"cluster", "nodegroup"} {
			if props := d.ParamsSchema()["properties"].(map[string]any); props[name] != nil {
				limits = append(limits, limit{[]string{d.Type}, name, "maxLength", cloud.MaxNameLength})
			}
		}
	}
	for _, l := range limits {
		for _, typ := range l.types {
			t.Run(typ+" "+l.path+" "+l.keyword, func(t *testing.T) {
				got := paramSchema(t, typ, l.path)[l.keyword]
				want := l.want
				if ss, ok := want.([]string); ok {
					var list []any
					for _, s := range ss {
						list = append(list, s)
					}
					want = list
				}
				assert.EqualValues(t, want, got)
			})
		}
	}
}

// TestAnEditorRefusesAResizeBeyondTheSpec validates `with` maps against
// the generated params schema, as an editor does.
func TestAnEditorRefusesAResizeBeyondTheSpec(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	require.NoError(t, c.AddResource("mem://resize.json", schemaValue(t, desc(t, "nks.cluster.resize").ParamsSchema())))
	sch, err := c.Compile("mem://resize.json")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		count any
		ok    bool
	}{
		{"one node is accepted", 1, true},
		{"ten nodes are accepted", 10, true},
		{"eleven nodes are refused", 11, false},
		{"zero nodes are refused", 0, false},
		{"an expression is accepted", "${{ inputs.count }}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sch.Validate(schemaValue(t, map[string]any{"cluster": "prod", "nodegroup": "default-worker", "node_count": tc.count}))
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func schemaValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}
