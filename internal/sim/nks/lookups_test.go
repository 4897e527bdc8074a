package nks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runbook/runbook/internal/sim/network"
)

// A create refers to the network world the network simulator serves: the
// UUIDs the lookups answer are accepted, unknown ones are refused.
func TestACreateRefersToNetworksSubnetsAndImagesThatExist(t *testing.T) {
	e := start(t)
	e.mustDo(202, "POST", "/v1/clusters", createBody("ext", func(_, l map[string]any) {
		l["external_network_id"] = network.PublicNetworkID
		l["external_subnet_id_list"] = network.PublicSubnet1ID + ":" + network.PublicSubnet2ID
	}))
	for _, tc := range []struct {
		name, want string
		change     func(body, labels map[string]any)
	}{
		{"an unknown fixed network", "Fixed network", func(b, _ map[string]any) { b["fixed_network"] = "00000000-0000-4000-8000-000000000000" }},
		{"an unknown fixed subnet", "Fixed subnet", func(b, _ map[string]any) { b["fixed_subnet"] = "00000000-0000-4000-8000-000000000000" }},
		{"a subnet of another network", "does not belong", func(b, _ map[string]any) { b["fixed_subnet"] = network.PublicSubnet1ID }},
		{"an internal network as the gateway's", "router:external", func(_, l map[string]any) { l["external_network_id"] = network.DefaultNetworkID }},
		{"an unknown gateway subnet", "External subnet", func(_, l map[string]any) {
			l["external_network_id"], l["external_subnet_id_list"] = network.PublicNetworkID, network.PublicSubnet1ID+":00000000-0000-4000-8000-000000000000"
		}},
		{"an unknown image", "Image", func(_, l map[string]any) { l["node_image"] = "00000000-0000-4000-8000-000000000000" }},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			code, detail := apiError(t, e.do("POST", "/v1/clusters", createBody("bad", tc.change)))
			assert.Equal(t, 400, code)
			assert.Contains(t, detail, tc.want)
		})
	}
	id := e.createCluster("ng-image", nil)
	body := ngBody("bad-image")
	body["image_id"] = "00000000-0000-4000-8000-000000000000"
	code, detail := apiError(t, e.do("POST", "/v1/clusters/"+id+"/nodegroups", body))
	assert.Equal(t, 400, code)
	assert.Contains(t, detail, "image_id")
}
