package network_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
)

// ownTypes returns the example of every step type of this family, read
// from the registry; a type without one fails the test.
func ownTypes(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range steps.All() {
		if strings.HasPrefix(d.Type, "network.") || strings.HasPrefix(d.Type, "image.") {
			require.NotNil(t, d.Example, "%s has an example", d.Type)
			out[d.Type] = d.Example
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestLookupsAreReadsThatPlanTheirCalls(t *testing.T) {
	for name, with := range ownTypes(t) {
		d := desc(t, name)
		assert.False(t, d.Mutating, name)
		assert.False(t, d.Pure, "%s reads external state", name)
		require.NotNil(t, d.Plan, name)
		assert.Contains(t, d.ParamNames(), "connection", name)
		p, _, problems := d.Decode(with)
		require.Empty(t, problems, name)
		calls := d.Plan(p)
		require.Len(t, calls, 1, name)
		assert.Equal(t, "GET", calls[0].Method, name)
	}
	plan := func(name string, with map[string]any) string {
		d := desc(t, name)
		p, _, problems := d.Decode(with)
		require.Empty(t, problems)
		return d.Plan(p)[0].Path
	}
	assert.Equal(t, "/v2.0/networks?router:external=True", plan("network.external", nil))
	assert.Equal(t, "/v2.0/networks?router:external=False", plan("network.list", map[string]any{"router_external": false}))
	assert.Equal(t, "/v2.0/subnets?network_id=<from steps.ext.outputs.network_id>",
		plan("network.subnets", map[string]any{"network_id": "<from steps.ext.outputs.network_id>"}))
	assert.Equal(t, "/v2/images?name=CentOS+7.9", plan("image.find", map[string]any{"name": "CentOS 7.9"}))
}

func TestParamsAreCheckedAtLoadTime(t *testing.T) {
	for _, tc := range []struct {
		name, typ string
		with      map[string]any
		want      string
	}{
		{"a status outside the API's", "network.list", map[string]any{"status": "UP"}, "status"},
		{"router_external as a string", "network.list", map[string]any{"router_external": "True"}, "router_external"},
		{"subnets without a network", "network.subnets", map[string]any{}, "network_id"},
		{"a cidr that is not one", "network.subnets", map[string]any{"network_id": "n", "cidr": "10.0.0.0/33"}, "cidr"},
		{"an image without a name", "image.find", map[string]any{}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := desc(t, tc.typ).CheckLiteral(tc.with)
			require.NotEmpty(t, ps)
			assert.Equal(t, tc.want, ps[0].Path)
		})
	}
}
